package jwkset

import "testing"

// The thumbprints published with the RFCs, as documented inputs: RFC 7638
// §3.1 (RSA) and RFC 8037 Appendix A.3 (Ed25519, the key of RFC 8032 §7.1
// TEST 1). kid, alg and use are not part of a thumbprint.
func TestThumbprintRFC(t *testing.T) {
	tests := []struct {
		name string
		key  JWK
		want string
	}{
		{"RFC 7638 §3.1", JWK{Kty: KtyRSA, Kid: "2011-04-29", Alg: AlgRS256,
			N: "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw",
			E: "AQAB"}, "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs"},
		{"RFC 8037 A.3", JWK{Kty: KtyOKP, Kid: "any", Alg: AlgEdDSA, Use: "sig", Crv: CrvEd25519,
			X: "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}, "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.key.Validate("key"); err != nil {
				t.Fatalf("the RFC key is not a valid key here: %v", err)
			}
			if got := tt.key.Thumbprint(); got != tt.want {
				t.Fatalf("Thumbprint = %s, want %s", got, tt.want)
			}
			other := tt.key
			other.Kid, other.Use = "another-kid", ""
			if got := other.Thumbprint(); got != tt.want {
				t.Fatalf("the thumbprint depends on kid or use: %s", got)
			}
		})
	}
	// An EC key's thumbprint covers y: two keys sharing x differ.
	a, b := ecKey("a", 1), ecKey("a", 1)
	b.Y = ecKey("b", 2).Y
	if a.Thumbprint() == b.Thumbprint() {
		t.Fatal("an EC thumbprint ignores y")
	}
}
