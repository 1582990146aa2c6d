// The pins as agents share them: the inner maps of a slot are made in the
// shape of the pinned templates, by the agent that loaded the programs and
// by one that adopted them; pins of another ABI are refused while a sandbox
// uses them and replaced once none does.
#include <fmt/format.h>

#include "../../include/airlock/abi.h"
#include "fixture.h"

namespace it {
namespace {

class Pins : public AirlockTest {
protected:
	std::string map_pin(const std::string& name) { return env().bpf_dir + "/maps/" + name; }

	// `bpftool -j ARGS`, parsed; null if it fails.
	json bpftool(std::vector<std::string> args)
	{
		args.insert(args.begin(), {"bpftool", "-j"});
		Result r = run(args, 10s);
		if (r.status != 0)
			return json();
		return json::parse(r.out, nullptr, false);
	}

	// The shape of a map: what an inner map must share with its template.
	static json shape(const json& info)
	{
		if (!info.is_object())
			return info;
		return {{"type", info.value("type", "")},
			{"flags", info.value("flags", -1)},
			{"bytes_key", info.value("bytes_key", -1)},
			{"bytes_value", info.value("bytes_value", -1)},
			{"max_entries", info.value("max_entries", -1)}};
	}

	static std::vector<std::string> key_bytes(uint32_t v)
	{
		std::vector<std::string> out;
		for (int i = 0; i < 4; i++)
			out.push_back(std::to_string((v >> (8 * i)) & 0xff));
		return out;
	}

	// A map's value at a four-byte key, byte by byte; empty if none.
	std::vector<unsigned> value_at(const std::string& map, uint32_t key)
	{
		std::vector<std::string> args = {"map", "lookup", "pinned", map_pin(map), "key"};
		for (auto& b : key_bytes(key))
			args.push_back(b);
		json j = bpftool(args);
		std::vector<unsigned> out;
		if (j.is_object() && j.contains("value"))
			for (const auto& b : j["value"])
				out.push_back(std::stoul(b.get<std::string>(), nullptr, 16));
		return out;
	}

	static uint32_t u32(const std::vector<unsigned>& b)
	{
		return b.size() >= 4 ? b[0] | b[1] << 8 | b[2] << 16 | b[3] << 24 : ~0u;
	}

	// The id of the inner map an outer map holds at slot.
	uint32_t inner_id(const std::string& outer, uint32_t slot) { return u32(value_at(outer, slot)); }

	uint32_t slot_of(const std::string& sandbox)
	{
		json rec = read_json_object(env().state_dir + "/sandboxes/" + sandbox + ".json");
		return rec.value("slot", ~0u);
	}

	uint32_t pinned_abi() { return u32(value_at("al_config", 0)); }

	bool has_record(const std::string& sandbox)
	{
		return exists(env().state_dir + "/sandboxes/" + sandbox + ".json");
	}

	static RunSpec spec(const std::string& name, const std::string& policy, std::vector<std::string> cmd)
	{
		RunSpec s;
		s.policy = policy;
		s.name = name;
		s.cmd = std::move(cmd);
		return s;
	}

	RunSpec waiting(const std::string& name, const std::string& policy, const std::string& go)
	{
		return spec(name, policy, env().py("wait_file.py", {go, "30"}));
	}

	// Its command runs: the sandbox is whole (its record is written before
	// its maps are made, so that a failure half-way is cleaned up).
	bool started(const std::string& name, Proc& runner)
	{
		auto running = [&] {
			for (const auto& j : events(env().audit(), "sandbox-start"))
				if (j.value("sandbox", "") == name)
					return true;
			return false;
		};
		return wait_until([&] { return running() || !runner.running(); }, 10s) && runner.running();
	}
};

const char* const kTemplates[][2] = {
	{"al_rings", "al_ring_template"},
	{"al_pending", "al_pending_template"},
	{"al_learned", "al_learned_template"},
	{"al_unix_bound", "al_unix_bound_template"},
};

TEST_F(Pins, InnerMapsOfASlotHaveTheShapeOfThePinnedTemplate)
{
	std::string policy = env().write_policy("policy.json", base_policy("it-pins"));
	std::string go = env().path("go");
	std::string loader = "l" + env().id, adopter = "a" + env().id;
	Proc& first = env().start_run(waiting(loader, policy, go));
	ASSERT_TRUE(started(loader, first)) << first.describe();
	Proc& second = env().start_run(waiting(adopter, policy, go));
	ASSERT_TRUE(started(adopter, second)) << second.describe();
	EXPECT_NE(slot_of(loader), slot_of(adopter));

	for (const auto& [outer, tmpl] : kTemplates) {
		json want = shape(bpftool({"map", "show", "pinned", map_pin(tmpl)}));
		ASSERT_TRUE(want.is_object()) << tmpl << " is not pinned";
		for (const std::string& sb : {loader, adopter}) {
			uint32_t id = inner_id(outer, slot_of(sb));
			ASSERT_NE(id, ~0u) << outer << " holds nothing at the slot of " << sb;
			EXPECT_EQ(shape(bpftool({"map", "show", "id", std::to_string(id)})), want)
				<< outer << " of sandbox " << sb << " (the agent that "
				<< (sb == loader ? "loaded" : "adopted") << " the programs)";
		}
	}

	write_file(go, "");
	EXPECT_EQ(first.wait(15s), 0) << first.describe();
	EXPECT_EQ(second.wait(15s), 0) << second.describe();
}

TEST_F(Pins, PinsOfAnotherAbiAreRefusedWhileUsedAndReplacedOnceIdle)
{
	std::string policy = env().write_policy("policy.json", base_policy("it-pins-abi"));
	std::string go = env().path("go");
	std::string user = "u" + env().id, refused = "r" + env().id, fresh = "f" + env().id;
	Proc& runner = env().start_run(waiting(user, policy, go));
	ASSERT_TRUE(started(user, runner)) << runner.describe();
	auto ids_before = pinned_prog_ids(env().bpf_dir);
	ASSERT_FALSE(ids_before.empty());
	ASSERT_EQ(pinned_abi(), unsigned(AL_ABI_VERSION));

	// The pins of the ABI before: its version in al_config, no templates.
	auto cfg = value_at("al_config", 0);
	ASSERT_EQ(cfg.size(), sizeof(al_config));
	cfg[0] = AL_ABI_VERSION - 1;
	std::vector<std::string> update = {"bpftool", "map", "update", "pinned", map_pin("al_config"), "key"};
	for (auto& b : key_bytes(0))
		update.push_back(b);
	update.push_back("value");
	for (unsigned b : cfg)
		update.push_back(std::to_string(b));
	Result u = run(update, 10s);
	ASSERT_EQ(u.status, 0) << u.describe();
	for (const auto& [outer, tmpl] : kTemplates)
		ASSERT_EQ(::unlink(map_pin(tmpl).c_str()), 0) << tmpl;
	ASSERT_EQ(pinned_abi(), unsigned(AL_ABI_VERSION - 1));

	// A sandbox uses them: refused, said so, nothing replaced.
	std::string d = env().marker("abi-refused");
	RunResult rr = env().run(spec(refused, policy, env().py("tcp_send.py", {dest4(kAllowed4, 9004), d})), 20s);
	EXPECT_NE(rr.r.status, 0) << rr.describe();
	std::string said = fmt::format("speak ABI {}, this airlock speaks {}", AL_ABI_VERSION - 1, AL_ABI_VERSION);
	EXPECT_NE(rr.r.err.find(said), std::string::npos) << rr.describe();
	EXPECT_FALSE(has_record(refused));
	EXPECT_EQ(pinned_prog_ids(env().bpf_dir), ids_before);
	EXPECT_FALSE(exists(map_pin("al_ring_template")));

	// The sandbox that uses them ends as it would have.
	write_file(go, "");
	EXPECT_EQ(runner.wait(15s), 0) << runner.describe();

	// None does: the next agent replaces them with its own, and enforces.
	std::string a = env().marker("abi-a"), den = env().marker("abi-d");
	rr = env().run(spec(fresh, policy,
			    env().py("tcp_send.py", {dest4(kAllowed4, 9005), a, dest4(kDenied4, 9006), den})),
		       20s);
	EXPECT_EQ(rr.r.status, 0) << rr.describe();
	EXPECT_TRUE(Ok(ResultFor(rr, a))) << rr.describe();
	EXPECT_EQ(Errno(ResultFor(rr, den)), "EPERM") << rr.describe();
	EXPECT_TRUE(ArrivedIntact(env(), a));
	EXPECT_TRUE(NothingArrived(env(), den));
	EXPECT_EQ(pinned_abi(), unsigned(AL_ABI_VERSION));
	auto ids_after = pinned_prog_ids(env().bpf_dir);
	EXPECT_EQ(ids_after.size(), ids_before.size());
	for (const auto& [name, id] : ids_after)
		EXPECT_NE(id, ids_before[name]) << name << " was not replaced";
	for (const auto& [outer, tmpl] : kTemplates)
		EXPECT_TRUE(exists(map_pin(tmpl))) << tmpl;
}

}  // namespace
}  // namespace it
