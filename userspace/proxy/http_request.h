#pragma once
// How the recorder reads an HTTP/1.x request: whether the first bytes of a
// stream can start one, and its body, every byte counted and the first
// max_body_bytes kept, every byte scanned for the policy's secrets.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <boost/beast/core/buffers_range.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/optional.hpp>

#include "gate/never_send.h"

namespace airlock::proxy {

inline constexpr size_t kHeaderLimit = 16 * 1024;
inline constexpr size_t kMaxMethod = 24;

// Whether the first bytes of a request can be an HTTP/1.x request line: a
// method token (A-Z, '-', '_') and a space. The parser only judges a whole
// header, which a banner or a ClientHello never completes.
enum class Sniff { Http, NotHttp, NeedMore };

inline Sniff sniff_http(std::string_view b)
{
	for (size_t i = 0; i < b.size() && i <= kMaxMethod; i++) {
		char c = b[i];
		if (c == ' ')
			return i > 0 ? Sniff::Http : Sniff::NotHttp;
		bool token = (c >= 'A' && c <= 'Z') || (i > 0 && (c == '-' || c == '_'));
		if (!token)
			return Sniff::NotHttp;
	}
	return b.size() > kMaxMethod ? Sniff::NotHttp : Sniff::NeedMore;
}

// A request body as the recorder reads it: every byte counted, the first
// `limit` kept. Beast's own bodies stop at their limit with an error; the
// recorder reads a large body to its end, to answer it.
struct RecordedBody {
	struct value_type {
		std::string kept;
		uint64_t limit = 0;
		uint64_t size = 0;
		gate::NeverSend::Scan* scan = nullptr;  // fed every byte, when set
	};

	class reader {
	public:
		template <bool isRequest, class Fields>
		reader(boost::beast::http::header<isRequest, Fields>&, value_type& b) : body_(b)
		{
		}
		void init(const boost::optional<std::uint64_t>&, boost::system::error_code& ec) { ec = {}; }
		template <class ConstBufferSequence>
		size_t put(const ConstBufferSequence& buffers, boost::system::error_code& ec)
		{
			ec = {};
			size_t n = 0;
			for (auto b : boost::beast::buffers_range_ref(buffers)) {
				const char* p = static_cast<const char*>(b.data());
				uint64_t room = body_.limit > body_.kept.size() ? body_.limit - body_.kept.size() : 0;
				body_.kept.append(p, static_cast<size_t>(std::min<uint64_t>(room, b.size())));
				if (body_.scan)
					body_.scan->feed(std::string_view(p, b.size()));
				n += b.size();
			}
			body_.size += n;
			return n;
		}
		void finish(boost::system::error_code& ec) { ec = {}; }

	private:
		value_type& body_;
	};
};

using Parser = boost::beast::http::request_parser<RecordedBody>;

}  // namespace airlock::proxy
