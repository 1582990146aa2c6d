// A sandboxed process against airlock itself. Run with --user it can neither
// open the pinned maps nor move itself out of its cgroup. As uid 0 with
// --keep-caps it could do both (file permissions guard them, not
// capabilities), and airlock says so when it starts.
#include <sys/stat.h>

#include <filesystem>

#include "fixture.h"

namespace it {
namespace {

class Tamper : public AirlockTest {
protected:
	// The clients, where an unprivileged user can read them whatever the
	// permissions of the checkout's parent directories.
	std::vector<std::string> py_for_anyone(const std::vector<std::string>& args)
	{
		namespace fs = std::filesystem;
		dir_ = env().state_dir + "-anyone";  // /run: /tmp may be closed to other users
		std::string dir = dir_;
		fs::create_directories(dir);
		::chmod(dir.c_str(), 0755);
		for (const char* f : {"tamper.py", "alclient.py"}) {
			fs::copy_file(client_script(f), dir + "/" + f, fs::copy_options::overwrite_existing);
			::chmod((dir + "/" + f).c_str(), 0644);
		}
		std::vector<std::string> argv = {python(), dir + "/tamper.py"};
		argv.insert(argv.end(), args.begin(), args.end());
		return argv;
	}
	void TearDown() override
	{
		if (!dir_.empty()) {
			std::error_code ec;
			std::filesystem::remove_all(dir_, ec);
		}
		AirlockTest::TearDown();
	}
	std::string dir_;
};

// uid 0 owns bpffs pins and cgroup.procs, whatever its capabilities. In its
// own mount namespace it sees neither (test_containment_root.cpp); with
// --keep-caps it stays in the host's, and airlock says so at start.
TEST_F(Tamper, RootCommandIsWarnedAboutOnlyWithKeepCaps)
{
	std::string policy = env().write_policy("t.json", base_policy("it-tamper"));
	RunSpec s;
	s.policy = policy;
	s.name = "t" + env().id;
	s.cmd = {"true"};
	RunResult rr = env().run(s, 20s);
	EXPECT_EQ(rr.r.status, 0) << rr.describe();
	EXPECT_EQ(rr.r.err.find("uid 0"), std::string::npos) << rr.describe();
	s.keep_caps = true;
	rr = env().run(s, 20s);
	EXPECT_EQ(rr.r.status, 0) << rr.describe();
	EXPECT_NE(rr.r.err.find("--keep-caps: the command runs as uid 0 in the host's mount namespace: it can open "
				"airlock's pinned maps"),
		  std::string::npos)
		<< rr.describe();
	EXPECT_NE(rr.r.err.find("run it with --user"), std::string::npos) << rr.describe();
}

TEST_F(Tamper, UnprivilegedUserCannotLeaveTheSandbox)
{
	std::string policy = env().write_policy("t.json", base_policy("it-tamper"));
	RunSpec s;
	s.policy = policy;
	s.name = "u" + env().id;
	s.user = "nobody";
	s.cmd = py_for_anyone({env().bpf_dir + "/maps/al_latch", cgroup2_mount()});
	RunResult rr = env().run(s, 20s);
	json out = rr.last();
	ASSERT_EQ(out.value("client", ""), "tamper") << rr.describe();
	EXPECT_NE(out.value("uid", 0), 0);
	// Not even there: its mount namespace has no bpffs.
	EXPECT_EQ(out.value("obj_get", ""), "ENOENT") << "an unprivileged sandbox found airlock's latch map";
	EXPECT_EQ(out.value("move", ""), "EACCES") << "an unprivileged sandbox moved itself to the root cgroup";
	EXPECT_EQ(out.value("cgroup_after", ""), "/") << "inside its cgroup namespace the sandbox is the root";
	EXPECT_EQ(rr.r.err.find("runs as uid 0"), std::string::npos) << rr.describe();
}

}  // namespace
}  // namespace it
