// /proc/PID/mountinfo as airlock reads it: escaped paths, the optional
// fields before the separator, lines without one.
#include <gtest/gtest.h>

#include "util/mountinfo.h"

namespace airlock {
namespace {

TEST(Mountinfo, FieldsAroundTheSeparatorAndEscapes)
{
	auto m = parse_mountinfo(
		"35 24 0:30 / /sys/fs/cgroup/unified rw,nosuid shared:9 - cgroup2 cgroup2 rw,nsdelegate\n"
		"36 24 0:31 /airlock/a /mnt/with\\040space rw master:1 shared:2 - cgroup2 none rw\n"
		"garbage without the separator\n"
		"37 24 0:32 / /sys/fs/bpf rw - bpf bpf rw,mode=700\n");
	ASSERT_EQ(m.size(), 3u);
	EXPECT_EQ(m[0].point, "/sys/fs/cgroup/unified");
	EXPECT_EQ(m[0].fstype, "cgroup2");
	EXPECT_EQ(m[0].super_options, "rw,nsdelegate");
	EXPECT_EQ(m[1].root, "/airlock/a");
	EXPECT_EQ(m[1].point, "/mnt/with space");
	EXPECT_EQ(m[2].fstype, "bpf");
	// A backslash not followed by three octal digits is itself.
	EXPECT_EQ(parse_mountinfo("1 2 0:1 / /a\\b rw - tmpfs t rw\n")[0].point, "/a\\b");
}

}  // namespace
}  // namespace airlock
