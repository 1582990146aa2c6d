#pragma once
// The daemon's control socket, served without ever blocking its loop: every
// connection is non-blocking and registered in the daemon's EventLoop; a request
// is read as it arrives, answered from a buffer written as the peer reads
// it, and a connection that has not finished by its deadline is closed. A
// client that connects and sends nothing, sends half a line, or never reads
// its answer costs one descriptor until its deadline, never a wait: the
// freeze of another sandbox is not delayed by it.
#include <sys/socket.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "daemon/event_loop.h"
#include "util/fd.h"

namespace airlock {

class ControlServer {
public:
	// What a request leads to: an answer (JSON lines, newline-terminated)
	// and, for `events --follow`, what takes the connection over once the
	// answer is written.
	struct Answer {
		std::string text;
		std::function<void(Fd)> then;
	};
	// The peer's credentials are checked before a byte is read: refuse()
	// returns the answer to send instead of serving it (nullopt serves it).
	using Refuse = std::function<std::optional<Answer>(const struct ucred&)>;
	using Handle = std::function<Answer(const std::string& line, const struct ucred&)>;

	static constexpr uint64_t kRequestNs = 1000000000ull;  // to send the whole request
	static constexpr uint64_t kAnswerNs = 5000000000ull;   // to read the whole answer
	static constexpr size_t kMaxRequest = 65536;
	static constexpr size_t kMaxConnections = 64;

	// A non-blocking socket listening at path, mode 0600 (a dead daemon's
	// socket there is replaced: call with the state directory's lock held).
	static Fd listen(const std::string& path);

	// listener: non-blocking, listening; watched in loop from now on.
	ControlServer(EventLoop& loop, int listener, Refuse refuse, Handle handle);
	~ControlServer();
	ControlServer(const ControlServer&) = delete;
	ControlServer& operator=(const ControlServer&) = delete;

	// Closes what is past its deadline; returns how many.
	size_t expire(uint64_t now_ns);
	size_t connections() const { return conns_.size(); }

private:
	struct Conn {
		Fd fd;
		struct ucred cr {};
		std::string in, out;
		size_t sent = 0;
		bool answering = false;
		std::function<void(Fd)> then;
		uint64_t deadline = 0;
	};
	// The listener is readable: accept every pending connection.
	void accept_all();
	// A connection is ready (EPOLLIN, EPOLLOUT, hangup).
	void ready(uint64_t id, uint32_t events);
	void close(std::map<uint64_t, Conn>::iterator it);
	void answer(std::map<uint64_t, Conn>::iterator it, Answer a);
	// Writes what it can; false when the connection is done with (closed or adopted).
	bool flush(std::map<uint64_t, Conn>::iterator it);

	EventLoop& loop_;
	int listener_;
	uint64_t next_ = 0;
	Refuse refuse_;
	Handle handle_;
	std::map<uint64_t, Conn> conns_;
};

}  // namespace airlock
