#pragma once
// TLS in the world: a certificate authority per sandbox, and the recorder's
// side of a TLS connection to any name.
//
// The agent makes the CA when it first starts a sandbox's proxy: an ECDSA
// P-256 key that never touches a disk (it reaches the proxy through a
// sealed memfd) and a certificate that is written where the sandbox can
// read it, offered to its command through SSL_CERT_FILE and the variables
// of curl, Python requests, Node and git. The proxy mints, for the SNI of
// each connection (its original address when there is none), a leaf
// certificate signed by it, and ends the TLS connection itself; what is
// inside is recorded as any other connection. Nothing is forwarded.
#include <openssl/ssl.h>

#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "net/address.h"

namespace airlock::proxy {

struct WorldCa {
	std::string cert_pem;
	std::string key_pem;
};

// A new CA for the sandbox: valid from an hour ago for `days` days.
WorldCa make_world_ca(const std::string& sandbox, int days = 90);

// The environment variables through which a command's TLS clients trust
// the bundle at `path`.
std::vector<std::string> ca_environment(const std::string& path);

struct SslCtxFree {
	void operator()(SSL_CTX* c) const { SSL_CTX_free(c); }
};
struct SslFree {
	void operator()(SSL* s) const { SSL_free(s); }
};
using SslPtr = std::unique_ptr<SSL, SslFree>;

// The recorder's TLS server: TLS 1.2 and 1.3, ALPN http/1.1 only (a client
// offering h2 alone gets no ALPN and speaks what it speaks), a leaf per name
// (at most kMaxLeaves kept; past that they are minted again).
class TlsTerminator {
public:
	TlsTerminator(const std::string& ca_cert_pem, const std::string& ca_key_pem);
	~TlsTerminator();
	TlsTerminator(const TlsTerminator&) = delete;
	TlsTerminator& operator=(const TlsTerminator&) = delete;

	// A server session for a connection that asked for `sni` ("": none, then
	// the certificate names `addr`), reading and writing memory BIOs.
	SslPtr session(const std::string& sni, const Address& addr);
	size_t leaves() const { return leaves_.size(); }

	// The server context sessions are made from (the HTTP gate makes its
	// own sessions of it and gives each its leaf once the SNI is known).
	SSL_CTX* context() const { return ctx_.get(); }
	// Gives a server session the leaf for `sni` ("": for `addr`) and the
	// CA as its chain. False when OpenSSL refused.
	bool use_leaf(SSL*, const std::string& sni, const Address& addr);

	static constexpr size_t kMaxLeaves = 4096;

private:
	struct Leaf;
	std::shared_ptr<Leaf> leaf_for(const std::string& key, bool ip);

	std::unique_ptr<SSL_CTX, SslCtxFree> ctx_;
	X509* ca_ = nullptr;
	EVP_PKEY* ca_key_ = nullptr;
	EVP_PKEY* leaf_key_ = nullptr;
	std::map<std::string, std::shared_ptr<Leaf>> leaves_;
};

// OpenSSL's first queued error as one line ("" none), and the queue cleared.
std::string openssl_error();

}  // namespace airlock::proxy
