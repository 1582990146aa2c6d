// The control server's deadlines: a client that sent nothing by its deadline
// is closed, and one whose whole request arrived while the daemon's loop was
// busy elsewhere (a slow attach) is answered, not closed for the loop's delay.
#include <gtest/gtest.h>

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "daemon/control_server.h"
#include "daemon/event_loop.h"
#include "util/clock.h"
#include "util/fd.h"

namespace {

using airlock::ControlServer;
using airlock::EventLoop;
using airlock::Fd;

struct Server {
	std::string dir, path;
	EventLoop loop;
	Fd listener;
	std::unique_ptr<ControlServer> control;
	Server()
	{
		char tmpl[] = "/tmp/airlock-control-XXXXXX";
		dir = ::mkdtemp(tmpl);
		path = dir + "/control.sock";
		listener = ControlServer::listen(path);
		control = std::make_unique<ControlServer>(
			loop, listener.get(),
			[](const struct ucred&) { return std::optional<ControlServer::Answer>(); },
			[](const std::string& line, const struct ucred&) {
				return ControlServer::Answer{"answer to " + line + "\n", nullptr};
			});
	}
	~Server()
	{
		control.reset();
		::unlink(path.c_str());
		::rmdir(dir.c_str());
	}
	// A connected client, accepted by one round of the loop.
	Fd client()
	{
		Fd c(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
		struct sockaddr_un a = {};
		a.sun_family = AF_UNIX;
		path.copy(a.sun_path, sizeof(a.sun_path) - 1);
		EXPECT_EQ(::connect(c.get(), reinterpret_cast<struct sockaddr*>(&a), sizeof(a)), 0);
		loop.run_once();
		EXPECT_EQ(control->connections(), 1u);
		return c;
	}
};

std::string read_all(int fd)
{
	std::string out;
	char buf[256];
	for (ssize_t n; (n = ::recv(fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0;)
		out.append(buf, static_cast<size_t>(n));
	return out;
}

TEST(ControlServer, AClientThatSentNothingByItsDeadlineIsClosed)
{
	Server s;
	Fd c = s.client();
	EXPECT_EQ(s.control->expire(airlock::monotonic_ns()), 0u);
	EXPECT_EQ(s.control->expire(airlock::monotonic_ns() + 2 * ControlServer::kRequestNs), 1u);
	EXPECT_EQ(s.control->connections(), 0u);
	char b;
	EXPECT_EQ(::recv(c.get(), &b, 1, MSG_DONTWAIT), 0);  // closed
}

TEST(ControlServer, ARequestThatArrivedWhileTheLoopWasBusyIsAnswered)
{
	Server s;
	Fd c = s.client();
	std::string req = "{\"cmd\":\"ping\"}\n";
	ASSERT_EQ(::send(c.get(), req.data(), req.size(), 0), static_cast<ssize_t>(req.size()));
	// No round of the loop ran since: the deadline passes with the request
	// unread in the socket.
	EXPECT_EQ(s.control->expire(airlock::monotonic_ns() + 2 * ControlServer::kRequestNs), 0u);
	EXPECT_EQ(read_all(c.get()), "answer to {\"cmd\":\"ping\"}\n");
	EXPECT_EQ(s.control->connections(), 0u);
}

TEST(ControlServer, HalfARequestByTheDeadlineIsClosed)
{
	Server s;
	Fd c = s.client();
	ASSERT_EQ(::send(c.get(), "{\"cmd\"", 6, 0), 6);
	EXPECT_EQ(s.control->expire(airlock::monotonic_ns() + 2 * ControlServer::kRequestNs), 1u);
	EXPECT_EQ(read_all(c.get()), "");
	EXPECT_EQ(s.control->connections(), 0u);
}

}  // namespace
