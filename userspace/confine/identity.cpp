#include "confine/identity.h"

#include <grp.h>
#include <linux/capability.h>
#include <pwd.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "confine/process.h"
#include "util/error.h"

namespace airlock::confine {

Identity resolve_user(const std::string& spec)
{
	Identity id;
	if (spec.empty())
		return id;
	id.set = true;
	std::string user = spec.substr(0, spec.find(':'));
	std::string group = spec.find(':') == std::string::npos ? "" : spec.substr(spec.find(':') + 1);
	auto numeric = [](const std::string& s) {
		return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
	};
	if (numeric(user)) {
		id.uid = static_cast<uid_t>(std::stoul(user));
		struct passwd* pw = getpwuid(id.uid);
		id.gid = pw ? pw->pw_gid : static_cast<gid_t>(id.uid);
	} else {
		struct passwd* pw = getpwnam(user.c_str());
		if (!pw)
			fail("--user: no user named '{}'", user);
		id.uid = pw->pw_uid;
		id.gid = pw->pw_gid;
	}
	if (numeric(group)) {
		id.gid = static_cast<gid_t>(std::stoul(group));
	} else if (!group.empty()) {
		struct group* gr = getgrnam(group.c_str());
		if (!gr)
			fail("--user: no group named '{}'", group);
		id.gid = gr->gr_gid;
	}
	return id;
}

Identity user_or_nobody(const std::string& user)
{
	Identity id{true, 65534, 65534};
	if (struct passwd* pw = ::getpwnam(user.c_str())) {
		id.uid = pw->pw_uid;
		id.gid = pw->pw_gid;
	} else if (struct passwd* nobody = ::getpwnam("nobody")) {
		id.uid = nobody->pw_uid;
		id.gid = nobody->pw_gid;
	}
	return id;
}

int take_identity(const Identity& id)
{
	gid_t g = id.gid;
	if (setgroups(1, &g) != 0 || setresgid(g, g, g) != 0 || setresuid(id.uid, id.uid, id.uid) != 0)
		return errno;
	return 0;
}

void drop_to_user(const Identity& id)
{
	if (::geteuid() == 0) {
		for (int cap = 0; cap <= CAP_LAST_CAP; cap++)
			::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0);
		if (::setgroups(0, nullptr) != 0)
			fail_errno("setgroups");
	}
	if (::setresgid(id.gid, id.gid, id.gid) != 0)
		fail_errno("setresgid");
	if (::setresuid(id.uid, id.uid, id.uid) != 0)
		fail_errno("setresuid");
	set_no_new_privs();
	struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct d[2] = {};
	if (::syscall(SYS_capset, &h, d) != 0)
		fail_errno("capset");
	if (::setuid(0) == 0)
		fail("the process could become uid 0 again");
}

}  // namespace airlock::confine
