/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Domain rules: the most specific rule for a name, one or two LPM lookups. */
#ifndef AIRLOCK_NAMES_BPF_H
#define AIRLOCK_NAMES_BPF_H

#include "events.bpf.h"

/* key holds a name of n bytes (al_name_key form) followed by AL_NAME_END.
 * Returns the rules of the most specific entry that matches it: its exact
 * entry, else the longest "*.suffix" strictly above it. */
static __always_inline struct al_rule_set *al_name_match(struct al_name_key *key, __u32 n)
{
	key->prefixlen = AL_NAME_KEY_FIXED_BITS + 8 * (n + 1);
	struct al_rule_set *rs = bpf_map_lookup_elem(&al_names, key);

	if (rs && (rs->flags & AL_RS_WILDCARD) && rs->name_len >= n) {
		/* "*.x" matched x itself, which it does not cover: only
		 * entries strictly shorter than the name may answer. */
		key->prefixlen = AL_NAME_KEY_FIXED_BITS + 8 * n - 1;
		rs = bpf_map_lookup_elem(&al_names, key);
	}
	key->prefixlen = AL_NAME_KEY_FIXED_BITS + 8 * (n + 1);
	return rs;
}

/* The rule a DNS decision names: the first allowing range for an allowed
 * name, else the first range. */
static __always_inline __u16 al_name_rule(const struct al_rule_set *rs, int want_allow)
{
	for (int i = 0; i < AL_MAX_RANGES; i++) {
		if (i >= rs->count)
			break;
		if (!want_allow || rs->ranges[i].action == AL_ACTION_ALLOW)
			return rs->ranges[i].rule;
	}
	return AL_RULE_NONE;
}

#endif
