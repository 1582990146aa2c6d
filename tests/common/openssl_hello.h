#pragma once
// OpenSSL 3 on both sides of a ClientHello, in memory, for the tests of the
// ClientHello parser: a real client's first flight (what curl, Python and
// Node send is OpenSSL's), and a real server's reading of any bytes, as an
// independent judge of the parser.
#include <openssl/err.h>
#include <openssl/ssl.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace airlock::test {

struct HelloOptions {
	std::string server_name;        // "" none
	std::vector<std::string> alpn;  // none if empty
	int max_version = TLS1_3_VERSION;
};

// The bytes an OpenSSL client sends first (its ClientHello records).
inline std::string openssl_client_hello(const HelloOptions& o)
{
	std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> ctx(SSL_CTX_new(TLS_client_method()), SSL_CTX_free);
	SSL_CTX_set_max_proto_version(ctx.get(), o.max_version);
	std::unique_ptr<SSL, decltype(&SSL_free)> ssl(SSL_new(ctx.get()), SSL_free);
	BIO* in = BIO_new(BIO_s_mem());
	BIO* out = BIO_new(BIO_s_mem());
	SSL_set_bio(ssl.get(), in, out);
	if (!o.server_name.empty())
		SSL_set_tlsext_host_name(ssl.get(), o.server_name.c_str());
	if (!o.alpn.empty()) {
		std::string wire;
		for (const auto& p : o.alpn)
			wire += static_cast<char>(p.size()) + p;
		SSL_set_alpn_protos(ssl.get(), reinterpret_cast<const unsigned char*>(wire.data()),
				    static_cast<unsigned>(wire.size()));
	}
	SSL_set_connect_state(ssl.get());
	SSL_do_handshake(ssl.get());  // wants to read: the ClientHello is written
	char* data = nullptr;
	long n = BIO_get_mem_data(out, &data);
	return std::string(data, static_cast<size_t>(n));
}

// What an OpenSSL server made of the bytes as a ClientHello: whether it
// parsed one (its client_hello callback ran), the extensions in order, and
// the server_name extension's raw body.
struct OpensslView {
	bool parsed = false;
	std::vector<int> extensions;
	bool has_server_name = false;
	std::string server_name_ext;
	int error_reason = 0;  // not parsed: ERR_GET_REASON of OpenSSL's first error
};

inline OpensslView openssl_server_view(std::string_view bytes)
{
	OpensslView view;
	std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> ctx(SSL_CTX_new(TLS_server_method()), SSL_CTX_free);
	SSL_CTX_set_client_hello_cb(
		ctx.get(),
		[](SSL* s, int* al, void* arg) -> int {
			auto* v = static_cast<OpensslView*>(arg);
			v->parsed = true;
			int* ids = nullptr;
			size_t n = 0;
			if (SSL_client_hello_get1_extensions_present(s, &ids, &n) == 1) {
				v->extensions.assign(ids, ids + n);
				OPENSSL_free(ids);
			}
			const unsigned char* p = nullptr;
			size_t len = 0;
			if (SSL_client_hello_get0_ext(s, TLSEXT_TYPE_server_name, &p, &len) == 1) {
				v->has_server_name = true;
				v->server_name_ext.assign(reinterpret_cast<const char*>(p), len);
			}
			*al = SSL_AD_HANDSHAKE_FAILURE;
			return SSL_CLIENT_HELLO_ERROR;  // seen: stop here
		},
		&view);
	std::unique_ptr<SSL, decltype(&SSL_free)> ssl(SSL_new(ctx.get()), SSL_free);
	BIO* in = BIO_new_mem_buf(bytes.data(), static_cast<int>(bytes.size()));
	BIO_set_mem_eof_return(in, -1);  // no more bytes: "want read", not EOF
	SSL_set_bio(ssl.get(), in, BIO_new(BIO_s_mem()));
	SSL_set_accept_state(ssl.get());
	ERR_clear_error();
	SSL_do_handshake(ssl.get());
	if (!view.parsed)
		view.error_reason = ERR_GET_REASON(ERR_peek_error());
	ERR_clear_error();
	return view;
}

}  // namespace airlock::test
