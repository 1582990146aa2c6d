#include "proxy/tls.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

namespace airlock::proxy {

namespace {

[[noreturn]] void ssl_fail(const std::string& what)
{
	throw std::runtime_error(what + ": " + openssl_error());
}

struct BioFree {
	void operator()(BIO* b) const { BIO_free(b); }
};
using BioPtr = std::unique_ptr<BIO, BioFree>;
struct X509Free {
	void operator()(X509* x) const { X509_free(x); }
};
using X509Ptr = std::unique_ptr<X509, X509Free>;

EVP_PKEY* new_key()
{
	EVP_PKEY* k = EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256");
	if (!k)
		ssl_fail("generate an EC key");
	return k;
}

void add_ext(X509* cert, X509* issuer, int nid, const char* value)
{
	X509V3_CTX ctx;
	X509V3_set_ctx_nodb(&ctx);
	X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
	X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
	if (!ext || !X509_add_ext(cert, ext, -1)) {
		X509_EXTENSION_free(ext);
		ssl_fail(fmt::format("certificate extension {}", OBJ_nid2sn(nid)));
	}
	X509_EXTENSION_free(ext);
}

// A certificate for `key`, named `cn`, issued by `issuer` (itself when
// null; signed by the caller), valid from an hour ago for `seconds`.
X509Ptr new_cert(EVP_PKEY* key, const std::string& cn, X509* issuer, long seconds)
{
	X509Ptr c(X509_new());
	if (!c)
		ssl_fail("X509_new");
	unsigned char serial[16];
	if (RAND_bytes(serial, sizeof(serial)) != 1)
		ssl_fail("a serial number");
	serial[0] &= 0x7f;
	BIGNUM* bn = BN_bin2bn(serial, sizeof(serial), nullptr);
	bool ok = bn && X509_set_version(c.get(), 2) && BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(c.get())) &&
		  X509_gmtime_adj(X509_getm_notBefore(c.get()), -3600) &&
		  X509_gmtime_adj(X509_getm_notAfter(c.get()), seconds) && X509_set_pubkey(c.get(), key);
	BN_free(bn);
	X509_NAME* name = X509_get_subject_name(c.get());
	ok = ok && X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
					      reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
	ok = ok && X509_set_issuer_name(c.get(), issuer ? X509_get_subject_name(issuer) : name);
	if (!ok)
		ssl_fail("make a certificate");
	return c;
}

std::string pem_of(X509* c)
{
	BioPtr b(BIO_new(BIO_s_mem()));
	if (!b || !PEM_write_bio_X509(b.get(), c))
		ssl_fail("write a certificate");
	char* data = nullptr;
	long n = BIO_get_mem_data(b.get(), &data);
	return std::string(data, static_cast<size_t>(n));
}

// ALPN: http/1.1 when offered; otherwise none (the client speaks what it
// would without ALPN). Never h2: the recorder reads HTTP/1.x.
int select_alpn(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in, unsigned inlen, void*)
{
	static const unsigned char http11[] = "http/1.1";
	for (unsigned i = 0; i < inlen;) {
		unsigned n = in[i];
		if (i + 1 + n > inlen)
			break;
		if (n == 8 && std::memcmp(in + i + 1, http11, 8) == 0) {
			*out = in + i + 1;
			*outlen = 8;
			return SSL_TLSEXT_ERR_OK;
		}
		i += 1 + n;
	}
	return SSL_TLSEXT_ERR_NOACK;
}

}  // namespace

std::string openssl_error()
{
	unsigned long e = ERR_get_error();
	ERR_clear_error();
	if (e == 0)
		return {};
	char buf[256];
	ERR_error_string_n(e, buf, sizeof(buf));
	return buf;
}

WorldCa make_world_ca(const std::string& sandbox, int days)
{
	EVP_PKEY* key = new_key();
	std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> k(key, EVP_PKEY_free);
	// A CN is at most 64 bytes: the sandbox's name (up to 63) goes in O.
	X509Ptr c = new_cert(key, "airlock world CA", nullptr, 86400L * days);
	if (!X509_NAME_add_entry_by_txt(X509_get_subject_name(c.get()), "O", MBSTRING_UTF8,
					reinterpret_cast<const unsigned char*>(sandbox.c_str()), -1, -1, 0) ||
	    !X509_set_issuer_name(c.get(), X509_get_subject_name(c.get())))
		ssl_fail("name the world's CA");
	add_ext(c.get(), c.get(), NID_basic_constraints, "critical,CA:TRUE,pathlen:0");
	add_ext(c.get(), c.get(), NID_key_usage, "critical,keyCertSign,cRLSign");
	add_ext(c.get(), c.get(), NID_subject_key_identifier, "hash");
	if (!X509_sign(c.get(), key, EVP_sha256()))
		ssl_fail("sign the world's CA");
	WorldCa ca;
	ca.cert_pem = pem_of(c.get());
	BioPtr b(BIO_new(BIO_s_mem()));
	if (!b || !PEM_write_bio_PrivateKey(b.get(), key, nullptr, nullptr, 0, nullptr, nullptr))
		ssl_fail("write the world's CA key");
	char* data = nullptr;
	long n = BIO_get_mem_data(b.get(), &data);
	ca.key_pem.assign(data, static_cast<size_t>(n));
	return ca;
}

std::vector<std::string> ca_environment(const std::string& path)
{
	std::vector<std::string> env;
	for (const char* v :
	     {"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "GIT_SSL_CAINFO"})
		env.push_back(std::string(v) + "=" + path);
	return env;
}

struct TlsTerminator::Leaf {
	X509Ptr cert;
};

TlsTerminator::TlsTerminator(const std::string& ca_cert_pem, const std::string& ca_key_pem)
{
	BioPtr cb(BIO_new_mem_buf(ca_cert_pem.data(), static_cast<int>(ca_cert_pem.size())));
	BioPtr kb(BIO_new_mem_buf(ca_key_pem.data(), static_cast<int>(ca_key_pem.size())));
	ca_ = cb ? PEM_read_bio_X509(cb.get(), nullptr, nullptr, nullptr) : nullptr;
	ca_key_ = kb ? PEM_read_bio_PrivateKey(kb.get(), nullptr, nullptr, nullptr) : nullptr;
	if (!ca_ || !ca_key_ || X509_check_private_key(ca_, ca_key_) != 1) {
		X509_free(ca_);
		EVP_PKEY_free(ca_key_);
		ssl_fail("the world's CA");
	}
	leaf_key_ = new_key();
	ctx_.reset(SSL_CTX_new(TLS_server_method()));
	if (!ctx_ || !SSL_CTX_set_min_proto_version(ctx_.get(), TLS1_2_VERSION))
		ssl_fail("a TLS server context");
	SSL_CTX_set_options(ctx_.get(), SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_TICKET);
	SSL_CTX_set_num_tickets(ctx_.get(), 0);
	SSL_CTX_set_alpn_select_cb(ctx_.get(), select_alpn, nullptr);
	if (SSL_CTX_use_PrivateKey(ctx_.get(), leaf_key_) != 1)
		ssl_fail("the leaf key");
}

TlsTerminator::~TlsTerminator()
{
	X509_free(ca_);
	EVP_PKEY_free(ca_key_);
	EVP_PKEY_free(leaf_key_);
}

std::shared_ptr<TlsTerminator::Leaf> TlsTerminator::leaf_for(const std::string& key, bool ip)
{
	if (auto it = leaves_.find(key); it != leaves_.end())
		return it->second;
	if (leaves_.size() >= kMaxLeaves)
		leaves_.clear();
	auto leaf = std::make_shared<Leaf>();
	// The name is the subjectAltName's (a CN holds at most 64 bytes).
	leaf->cert = new_cert(leaf_key_, "airlock world", ca_, 7 * 86400L);
	add_ext(leaf->cert.get(), ca_, NID_basic_constraints, "critical,CA:FALSE");
	add_ext(leaf->cert.get(), ca_, NID_key_usage, "critical,digitalSignature");
	add_ext(leaf->cert.get(), ca_, NID_ext_key_usage, "serverAuth");
	add_ext(leaf->cert.get(), ca_, NID_authority_key_identifier, "keyid");
	add_ext(leaf->cert.get(), ca_, NID_subject_alt_name, ((ip ? "IP:" : "DNS:") + key).c_str());
	if (!X509_sign(leaf->cert.get(), ca_key_, EVP_sha256()))
		ssl_fail("sign a leaf for " + key);
	leaves_.emplace(key, leaf);
	return leaf;
}

bool TlsTerminator::use_leaf(SSL* s, const std::string& sni, const Address& addr)
{
	// The SNI is a host name of letters, digits, '-', '_' and dots (the
	// ClientHello parser's, or the HTTP gate's check), safe in a
	// subjectAltName.
	auto leaf = sni.empty() ? leaf_for(format_address(addr), true) : leaf_for(sni, false);
	return SSL_use_certificate(s, leaf->cert.get()) == 1 && SSL_add1_chain_cert(s, ca_) == 1;
}

SslPtr TlsTerminator::session(const std::string& sni, const Address& addr)
{
	SslPtr s(SSL_new(ctx_.get()));
	if (!s || !use_leaf(s.get(), sni, addr))
		ssl_fail("a TLS session");
	BIO* rbio = BIO_new(BIO_s_mem());
	BIO* wbio = BIO_new(BIO_s_mem());
	if (!rbio || !wbio) {
		BIO_free(rbio);
		BIO_free(wbio);
		ssl_fail("memory BIOs");
	}
	BIO_set_mem_eof_return(rbio, -1);
	SSL_set_bio(s.get(), rbio, wbio);
	SSL_set_accept_state(s.get());
	return s;
}

}  // namespace airlock::proxy
