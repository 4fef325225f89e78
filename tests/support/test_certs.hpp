// Certificates for the TLS tests, made with libcrypto in the test's own
// directory (no openssl CLI needed): a CA, a server certificate it signs for
// "localhost" and 127.0.0.1, a client certificate it signs, each as PEM
// files <name>.pem and <name>.key. EC P-256 keys, SHA-256, valid for a day.
#pragma once

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cstdio>
#include <stdexcept>
#include <string>

namespace cg::test {

class TestCert {
 public:
  // A self-signed CA (issuer == nullptr), or a leaf signed by `issuer`. `san`:
  // subjectAltName text ("DNS:localhost,IP:127.0.0.1"), "" for none.
  TestCert(const std::string& cn, const TestCert* issuer, const std::string& san, long serial) {
    key_ = EVP_EC_gen("P-256");
    cert_ = X509_new();
    if (key_ == nullptr || cert_ == nullptr) throw std::runtime_error("libcrypto: cannot make a key");
    X509_set_version(cert_, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(cert_), serial);
    X509_gmtime_adj(X509_getm_notBefore(cert_), -3600);
    X509_gmtime_adj(X509_getm_notAfter(cert_), 86400);
    X509_set_pubkey(cert_, key_);
    X509_NAME* name = X509_get_subject_name(cert_);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1,
                               0);
    X509_set_issuer_name(cert_, issuer != nullptr ? X509_get_subject_name(issuer->cert_) : name);
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, issuer != nullptr ? issuer->cert_ : cert_, cert_, nullptr, nullptr, 0);
    extension(&ctx, NID_basic_constraints, issuer == nullptr ? "critical,CA:TRUE" : "critical,CA:FALSE");
    extension(&ctx, NID_key_usage, issuer == nullptr ? "critical,keyCertSign,cRLSign" : "critical,digitalSignature");
    if (issuer == nullptr) extension(&ctx, NID_subject_key_identifier, "hash");
    if (issuer != nullptr) extension(&ctx, NID_authority_key_identifier, "keyid");
    if (!san.empty()) extension(&ctx, NID_subject_alt_name, san.c_str());
    if (X509_sign(cert_, issuer != nullptr ? issuer->key_ : key_, EVP_sha256()) == 0)
      throw std::runtime_error("libcrypto: cannot sign a certificate");
  }
  ~TestCert() {
    X509_free(cert_);
    EVP_PKEY_free(key_);
  }
  TestCert(const TestCert&) = delete;
  TestCert& operator=(const TestCert&) = delete;

  // Writes <dir>/<name>.pem and <dir>/<name>.key.
  void write(const std::string& dir, const std::string& name) const {
    FILE* c = std::fopen((dir + "/" + name + ".pem").c_str(), "w");
    FILE* k = std::fopen((dir + "/" + name + ".key").c_str(), "w");
    const bool ok = c != nullptr && k != nullptr && PEM_write_X509(c, cert_) == 1 &&
                    PEM_write_PrivateKey(k, key_, nullptr, nullptr, 0, nullptr, nullptr) == 1;
    if (c != nullptr) std::fclose(c);
    if (k != nullptr) std::fclose(k);
    if (!ok) throw std::runtime_error("cannot write " + dir + "/" + name + ".pem/.key");
  }
  // Writes the key alone to <dir>/<name>.key, encrypted (AES-256-CBC) with `pass`.
  void write_encrypted_key(const std::string& dir, const std::string& name, const std::string& pass) const {
    FILE* k = std::fopen((dir + "/" + name + ".key").c_str(), "w");
    const bool ok = k != nullptr && PEM_write_PKCS8PrivateKey(k, key_, EVP_aes_256_cbc(), pass.data(),
                                                              static_cast<int>(pass.size()), nullptr, nullptr) == 1;
    if (k != nullptr) std::fclose(k);
    if (!ok) throw std::runtime_error("cannot write " + dir + "/" + name + ".key");
  }

 private:
  void extension(X509V3_CTX* ctx, int nid, const char* value) {
    X509_EXTENSION* e = X509V3_EXT_conf_nid(nullptr, ctx, nid, value);
    if (e == nullptr || X509_add_ext(cert_, e, -1) != 1) throw std::runtime_error("libcrypto: bad extension");
    X509_EXTENSION_free(e);
  }
  EVP_PKEY* key_ = nullptr;
  X509* cert_ = nullptr;
};

}  // namespace cg::test
