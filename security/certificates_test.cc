#include "security/certificates.h"

#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <fstream>
#include <memory>
#include <string>

#include "base/testing/temp_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "security/crypto.h"

namespace ringlm {
namespace {

using ::testing::HasSubstr;

struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
using X509Ptr = std::unique_ptr<X509, X509Free>;

X509Ptr ParsePem(const std::string& pem) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new_mem_buf(pem.data(), pem.size()), BIO_free);
  return X509Ptr(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
}

// X509_verify_cert of `leaf` against a store holding only `ca`.
bool VerifiesAgainst(const std::string& ca_pem, const std::string& leaf_pem) {
  X509Ptr ca = ParsePem(ca_pem);
  X509Ptr leaf = ParsePem(leaf_pem);
  if (ca == nullptr || leaf == nullptr) return false;
  std::unique_ptr<X509_STORE, decltype(&X509_STORE_free)> store(X509_STORE_new(), X509_STORE_free);
  std::unique_ptr<X509_STORE_CTX, decltype(&X509_STORE_CTX_free)> ctx(X509_STORE_CTX_new(),
                                                                      X509_STORE_CTX_free);
  X509_STORE_add_cert(store.get(), ca.get());
  X509_STORE_CTX_init(ctx.get(), store.get(), leaf.get(), nullptr);
  X509_STORE_CTX_set_purpose(ctx.get(), X509_PURPOSE_SSL_SERVER);
  return X509_verify_cert(ctx.get()) == 1;
}

ClusterKey KeyOf(char fill) { return *ClusterKey::FromBytes(std::string(32, fill)); }

mode_t ModeOf(const std::string& path) {
  struct stat st;
  EXPECT_EQ(stat(path.c_str(), &st), 0);
  return st.st_mode & 07777;
}

TEST(ClusterCaTest, DerivationIsByteIdentical) {
  absl::StatusOr<ClusterKey> key = ClusterKey::Generate();
  ASSERT_TRUE(key.ok());
  absl::StatusOr<ClusterCa> a = ClusterCa::Derive(*key);
  absl::StatusOr<ClusterCa> b = ClusterCa::Derive(key->Clone());
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(a->cert_pem(), b->cert_pem());
  EXPECT_THAT(a->cert_pem(), HasSubstr("-----BEGIN CERTIFICATE-----"));
  EXPECT_EQ(a->cluster_id(), key->ClusterId());
}

TEST(ClusterCaTest, MatchesTheGoldenCertificate) {
  // Every node derives the CA itself, so a change to its bytes splits
  // clusters whose nodes run different ringlm versions. Change this value
  // only together with the HKDF info strings (a new key version).
  absl::StatusOr<ClusterCa> ca = ClusterCa::Derive(KeyOf('\x01'));
  ASSERT_TRUE(ca.ok()) << ca.status();
  EXPECT_EQ(HexEncode(Sha256(ca->cert_pem())),
            "852be7d385e368395c851e03ffadf9e28316830f96e8305ad46475986aeb4a29")
      << ca->cert_pem();
}

TEST(ClusterCaTest, HasTheDocumentedFields) {
  ClusterKey key = KeyOf('\x01');
  absl::StatusOr<ClusterCa> ca = ClusterCa::Derive(key);
  ASSERT_TRUE(ca.ok()) << ca.status();
  X509Ptr cert = ParsePem(ca->cert_pem());
  ASSERT_NE(cert, nullptr);
  EXPECT_EQ(X509_get_version(cert.get()), X509_VERSION_3);
  EXPECT_EQ(ASN1_INTEGER_get(X509_get0_serialNumber(cert.get())), 1);
  EXPECT_EQ(EVP_PKEY_get_id(X509_get0_pubkey(cert.get())), EVP_PKEY_ED25519);
  char cn[128] = {};
  X509_NAME_get_text_by_NID(X509_get_subject_name(cert.get()), NID_commonName, cn, sizeof(cn));
  EXPECT_EQ(std::string(cn), "ringlm cluster " + key.ClusterId());
  EXPECT_EQ(X509_NAME_cmp(X509_get_subject_name(cert.get()), X509_get_issuer_name(cert.get())), 0);
  EXPECT_EQ(X509_check_ca(cert.get()), 1);
  EXPECT_TRUE(X509_get_key_usage(cert.get()) & KU_KEY_CERT_SIGN);
  EXPECT_TRUE(X509_get_key_usage(cert.get()) & KU_CRL_SIGN);
  EXPECT_NE(X509_get0_subject_key_id(cert.get()), nullptr);
  int critical = -1;
  BASIC_CONSTRAINTS* bc = static_cast<BASIC_CONSTRAINTS*>(
      X509_get_ext_d2i(cert.get(), NID_basic_constraints, &critical, nullptr));
  ASSERT_NE(bc, nullptr);
  EXPECT_TRUE(bc->ca);
  EXPECT_EQ(critical, 1);
  BASIC_CONSTRAINTS_free(bc);
  ASN1_TIME* start = ASN1_TIME_new();
  ASN1_TIME* end = ASN1_TIME_new();
  ASN1_TIME_set_string_X509(start, "20200101000000Z");
  ASN1_TIME_set_string_X509(end, "21200101000000Z");
  EXPECT_EQ(ASN1_TIME_compare(X509_get0_notBefore(cert.get()), start), 0);
  EXPECT_EQ(ASN1_TIME_compare(X509_get0_notAfter(cert.get()), end), 0);
  ASN1_TIME_free(start);
  ASN1_TIME_free(end);
  // Self-signed, verifiable by itself.
  EXPECT_EQ(X509_verify(cert.get(), X509_get0_pubkey(cert.get())), 1);
}

TEST(ClusterCaTest, DifferentKeysGiveDifferentCas) {
  absl::StatusOr<ClusterCa> a = ClusterCa::Derive(KeyOf('a'));
  absl::StatusOr<ClusterCa> b = ClusterCa::Derive(KeyOf('b'));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->cert_pem(), b->cert_pem());
  EXPECT_NE(a->key().SpkiFingerprint(), b->key().SpkiFingerprint());
}

TEST(LeafTest, VerifiesOnlyAgainstItsOwnCa) {
  absl::StatusOr<ClusterCa> ca_a = ClusterCa::Derive(KeyOf('a'));
  absl::StatusOr<ClusterCa> ca_b = ClusterCa::Derive(KeyOf('b'));
  absl::StatusOr<PrivateKey> node_key = PrivateKey::Generate();
  ASSERT_TRUE(ca_a.ok() && ca_b.ok() && node_key.ok());
  absl::StatusOr<std::string> leaf = IssueLeaf(*ca_a, *node_key, "node-1", Role::kNode);
  ASSERT_TRUE(leaf.ok()) << leaf.status();

  EXPECT_TRUE(VerifiesAgainst(ca_a->cert_pem(), *leaf));
  EXPECT_FALSE(VerifiesAgainst(ca_b->cert_pem(), *leaf));
  EXPECT_TRUE(VerifyLeaf(ca_a->cert_pem(), *leaf).ok());
  EXPECT_EQ(VerifyLeaf(ca_b->cert_pem(), *leaf).code(), absl::StatusCode::kUnauthenticated);
  // A leaf cannot act as a CA for further leaves.
  EXPECT_FALSE(VerifiesAgainst(*leaf, *leaf));
}

TEST(LeafTest, CarriesNameRoleSanAndFingerprint) {
  absl::StatusOr<ClusterCa> ca = ClusterCa::Derive(KeyOf('a'));
  absl::StatusOr<PrivateKey> key = PrivateKey::Generate();
  ASSERT_TRUE(ca.ok() && key.ok());
  for (Role role : {Role::kNode, Role::kClient}) {
    absl::StatusOr<std::string> pem = IssueLeaf(*ca, *key, "some-name", role);
    ASSERT_TRUE(pem.ok()) << pem.status();
    absl::StatusOr<LeafInfo> info = InspectLeaf(*pem);
    ASSERT_TRUE(info.ok()) << info.status();
    EXPECT_EQ(info->common_name, "some-name");
    EXPECT_EQ(info->role, role);
    EXPECT_EQ(info->spki_fingerprint, key->SpkiFingerprint());
    EXPECT_EQ(info->spki_fingerprint.size(), 32u);
    EXPECT_EQ(*SpkiFingerprintOfPem(*pem), SpkiFingerprint(*key));

    X509Ptr cert = ParsePem(*pem);
    ASSERT_NE(cert, nullptr);
    EXPECT_EQ(X509_check_host(cert.get(), "ringlm-member", 0, 0, nullptr), 1);
    EXPECT_EQ(X509_check_ca(cert.get()), 0);
    EXPECT_TRUE(X509_get_extended_key_usage(cert.get()) & XKU_SSL_SERVER);
    EXPECT_TRUE(X509_get_extended_key_usage(cert.get()) & XKU_SSL_CLIENT);
    // Validity: started an hour ago, lasts 10 years (node) or a day (client).
    int days = 0, seconds = 0;
    ASSERT_EQ(ASN1_TIME_diff(&days, &seconds, X509_get0_notBefore(cert.get()),
                             X509_get0_notAfter(cert.get())),
              1);
    const double total_days = days + seconds / 86400.0;
    EXPECT_NEAR(total_days, role == Role::kNode ? 3652.0 + 1.0 / 24 : 1.0 + 1.0 / 24, 0.01);
  }
}

TEST(LeafTest, SerialsAreRandom) {
  absl::StatusOr<ClusterCa> ca = ClusterCa::Derive(KeyOf('a'));
  absl::StatusOr<PrivateKey> key = PrivateKey::Generate();
  ASSERT_TRUE(ca.ok() && key.ok());
  X509Ptr a = ParsePem(*IssueLeaf(*ca, *key, "n", Role::kNode));
  X509Ptr b = ParsePem(*IssueLeaf(*ca, *key, "n", Role::kNode));
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_NE(ASN1_INTEGER_cmp(X509_get0_serialNumber(a.get()), X509_get0_serialNumber(b.get())), 0);
}

TEST(LeafTest, RejectsBadCommonNames) {
  absl::StatusOr<ClusterCa> ca = ClusterCa::Derive(KeyOf('a'));
  absl::StatusOr<PrivateKey> key = PrivateKey::Generate();
  ASSERT_TRUE(ca.ok() && key.ok());
  EXPECT_EQ(IssueLeaf(*ca, *key, "", Role::kNode).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(IssueLeaf(*ca, *key, std::string(65, 'x'), Role::kNode).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(IssueLeaf(*ca, *key, std::string(64, 'x'), Role::kNode).ok());
}

TEST(LeafTest, InspectRejectsTheCaAndGarbage) {
  absl::StatusOr<ClusterCa> ca = ClusterCa::Derive(KeyOf('a'));
  ASSERT_TRUE(ca.ok());
  EXPECT_EQ(InspectLeaf(ca->cert_pem()).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(InspectLeaf("garbage").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SpkiFingerprintOfPem("garbage").status().code(), absl::StatusCode::kInvalidArgument);
  // The CA's fingerprint is that of its derived key.
  EXPECT_EQ(*SpkiFingerprintOfPem(ca->cert_pem()), ca->key().SpkiFingerprint());
}

TEST(PrivateKeyTest, PemRoundTripAndSeedDeterminism) {
  absl::StatusOr<PrivateKey> key = PrivateKey::Generate();
  ASSERT_TRUE(key.ok());
  absl::StatusOr<std::string> pem = key->ToPem();
  ASSERT_TRUE(pem.ok());
  EXPECT_THAT(*pem, HasSubstr("BEGIN PRIVATE KEY"));
  absl::StatusOr<PrivateKey> back = PrivateKey::FromPem(*pem);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->SpkiFingerprint(), key->SpkiFingerprint());

  const std::string seed(32, '\x07');
  EXPECT_EQ(PrivateKey::FromEd25519Seed(seed)->SpkiFingerprint(),
            PrivateKey::FromEd25519Seed(seed)->SpkiFingerprint());
  EXPECT_EQ(PrivateKey::FromEd25519Seed("short").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PrivateKey::FromPem("nope").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(NodeKeyTest, PersistsAcrossLoads) {
  const std::string state_dir = testing::MakeTempDir("certificates_test") + "/state/nested";
  absl::StatusOr<PrivateKey> first = LoadOrCreateNodeKey(state_dir);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(ModeOf(state_dir), 0700u);
  EXPECT_EQ(ModeOf(state_dir + "/node_key.pem"), 0600u);
  absl::StatusOr<PrivateKey> second = LoadOrCreateNodeKey(state_dir);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(first->SpkiFingerprint(), second->SpkiFingerprint());

  absl::StatusOr<PrivateKey> elsewhere =
      LoadOrCreateNodeKey(testing::MakeTempDir("certificates_test"));
  ASSERT_TRUE(elsewhere.ok());
  EXPECT_NE(elsewhere->SpkiFingerprint(), first->SpkiFingerprint());
}

TEST(NodeKeyTest, CorruptFileIsDataLoss) {
  const std::string state_dir = testing::MakeTempDir("certificates_test");
  const std::string path = state_dir + "/node_key.pem";
  std::ofstream(path) << "-----BEGIN PRIVATE KEY-----\nbroken\n-----END PRIVATE KEY-----\n";
  ASSERT_EQ(chmod(path.c_str(), 0600), 0);
  absl::StatusOr<PrivateKey> key = LoadOrCreateNodeKey(state_dir);
  ASSERT_FALSE(key.ok());
  EXPECT_EQ(key.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(key.status().message()), HasSubstr(path));
}

TEST(NodeKeyTest, LooseModeIsRefused) {
  const std::string state_dir = testing::MakeTempDir("certificates_test");
  ASSERT_TRUE(LoadOrCreateNodeKey(state_dir).ok());
  const std::string path = state_dir + "/node_key.pem";
  ASSERT_EQ(chmod(path.c_str(), 0644), 0);
  absl::StatusOr<PrivateKey> key = LoadOrCreateNodeKey(state_dir);
  EXPECT_EQ(key.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(key.status().message()), HasSubstr("chmod 600 " + path));
}

}  // namespace
}  // namespace ringlm
