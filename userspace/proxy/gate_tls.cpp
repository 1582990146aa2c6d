#include "proxy/gate_tls.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

#include <unistd.h>

#include <cerrno>
#include <stdexcept>

#include <fmt/format.h>

namespace airlock::proxy {

namespace ssl = boost::asio::ssl;

namespace {

SSL_CTX* shared(SSL_CTX* c)
{
	if (!c || SSL_CTX_up_ref(c) != 1)
		throw std::runtime_error("the sandbox's TLS context: " + openssl_error());
	return c;
}

// Every certificate of a PEM text added to store; the count, or why not.
size_t add_pem(X509_STORE* store, const std::string& pem, const std::string& what)
{
	std::unique_ptr<BIO, decltype(&BIO_free)> b(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())),
						    BIO_free);
	if (!b)
		throw std::runtime_error(what + ": " + openssl_error());
	size_t n = 0;
	while (X509* c = PEM_read_bio_X509(b.get(), nullptr, nullptr, nullptr)) {
		int ok = X509_STORE_add_cert(store, c);
		X509_free(c);
		if (ok != 1)
			throw std::runtime_error(what + ": " + openssl_error());
		++n;
	}
	// The loop ends at the end of the text (PEM_R_NO_START_LINE) or at a
	// block OpenSSL could not read.
	unsigned long e = ERR_peek_last_error();
	if (e && !(ERR_GET_LIB(e) == ERR_LIB_PEM && ERR_GET_REASON(e) == PEM_R_NO_START_LINE))
		throw std::runtime_error(what + ": " + openssl_error());
	ERR_clear_error();
	if (n == 0)
		throw std::runtime_error(what + ": no certificate in it");
	return n;
}

// The system's roots, or "" where the system has none (no such file): its
// origins then verify by a rule's tls.upstream_ca alone, or not at all.
std::string read_all(const std::string& path)
{
	if (::access(path.c_str(), F_OK) != 0 && errno == ENOENT)
		return "";
	std::unique_ptr<BIO, decltype(&BIO_free)> b(BIO_new_file(path.c_str(), "r"), BIO_free);
	if (!b)
		throw std::runtime_error("the system's roots " + path + ": " + openssl_error());
	std::string out;
	char buf[16384];
	int n = 0;
	while ((n = BIO_read(b.get(), buf, sizeof(buf))) > 0)
		out.append(buf, static_cast<size_t>(n));
	return out;
}

}  // namespace

GateTls::GateTls(std::shared_ptr<TlsTerminator> terminator, const std::string& roots_file)
    : terminator_(std::move(terminator)), server_(shared(terminator_->context())),
      roots_pem_(read_all(roots_file.empty() ? X509_get_default_cert_file() : roots_file))
{
}

ssl::context& GateTls::upstream(const std::string& extra_roots_pem)
{
	if (auto it = upstream_.find(extra_roots_pem); it != upstream_.end())
		return *it->second;
	auto ctx = std::make_unique<ssl::context>(ssl::context::tls_client);
	SSL_CTX* c = ctx->native_handle();
	if (!SSL_CTX_set_min_proto_version(c, TLS1_2_VERSION))
		throw std::runtime_error("an origin's TLS context: " + openssl_error());
	SSL_CTX_set_options(c, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_TICKET);
	X509_STORE* store = SSL_CTX_get_cert_store(c);
	if (!roots_pem_.empty())
		add_pem(store, roots_pem_, "the system's roots");
	if (!extra_roots_pem.empty())
		add_pem(store, extra_roots_pem, "tls.upstream_ca");
	SSL_CTX_set_verify(c, SSL_VERIFY_PEER, nullptr);
	static const unsigned char alpn[] = "\x08http/1.1";
	if (SSL_CTX_set_alpn_protos(c, alpn, sizeof(alpn) - 1) != 0)
		throw std::runtime_error("an origin's ALPN: " + openssl_error());
	return *upstream_.emplace(extra_roots_pem, std::move(ctx)).first->second;
}

bool GateTls::expect_peer(SSL* s, const std::string& name, const Address& addr)
{
	if (name.empty()) {
		X509_VERIFY_PARAM* p = SSL_get0_param(s);
		return X509_VERIFY_PARAM_set1_ip_asc(p, format_address(addr).c_str()) == 1;
	}
	X509_VERIFY_PARAM_set_hostflags(SSL_get0_param(s), X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
	return SSL_set_tlsext_host_name(s, name.c_str()) == 1 && SSL_set1_host(s, name.c_str()) == 1;
}

std::string GateTls::verify_problem(SSL* s)
{
	long r = SSL_get_verify_result(s);
	if (r != X509_V_OK)
		return fmt::format("certificate not verified ({})", X509_verify_cert_error_string(r));
	if (!SSL_get0_peer_certificate(s))
		return "no certificate shown";
	return {};
}

}  // namespace airlock::proxy
