package plugin

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/qinglong/kubectl-ql3/ceremony/keyset/jwkset"
	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// keysetKeys turns --key files (PEM or OpenSSH public keys) and their
// optional --kid values into keyset JWKs.
type keysetKeys struct {
	keys, kids []string
}

func (o *keysetKeys) add(cmd *cobra.Command, what string) {
	cmd.Flags().StringArrayVar(&o.keys, "key", nil, "public key `FILE`: PEM (PUBLIC KEY, RSA PUBLIC KEY) or one OpenSSH line (ssh-ed25519, ecdsa-sha2-nistp256, ssh-rsa)"+what)
	cmd.Flags().StringArrayVar(&o.kids, "kid", nil, "key ID for the --key in the same position (default: the key's RFC 7638 thumbprint)")
	_ = cmd.MarkFlagRequired("key")
}

func (o *keysetKeys) jwks() ([]jwkset.JWK, error) {
	if len(o.kids) > len(o.keys) {
		return nil, fail.Errorf(fail.Invalid, "%d --kid values for %d --key files: give at most one --kid per --key, in the same order", len(o.kids), len(o.keys))
	}
	out := make([]jwkset.JWK, len(o.keys))
	for i, file := range o.keys {
		data, err := readBounded(file, 64<<10)
		if err != nil {
			return nil, fail.Errorf(fail.Invalid, "--key %s: %w", file, err)
		}
		pub, err := jwkset.ParsePublicKey("--key "+file, data)
		if err != nil {
			return nil, err
		}
		kid := ""
		if i < len(o.kids) {
			kid = o.kids[i]
		}
		if out[i], err = jwkset.FromPublicKey("--key "+file, pub, kid); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func newCmdKeysetInit(streams genericiooptions.IOStreams) *cobra.Command {
	var (
		keys keysetKeys
		out  string
	)
	cmd := &cobra.Command{
		Use:   "init --key FILE... [--kid KID]... [--out FILE]",
		Short: "Write generation 1 of a keyset from public key files, offline",
		Long: `Write the first generation of an identity keyset: generation 1, the --key
files as its active keys, no revoked key IDs. Each --key is a public key as
users hold them — PEM (openssl pkey -pubout) or one OpenSSH line (a .pub
file) — of a kind the keyset holds: Ed25519, P-256 or RSA of 2048 to 16384
bits. A private key is refused. Each key's ID is the --kid in the same position
or, without one, the key's RFC 7638 thumbprint. The keyset is checked by the
same rules "keyset verify" applies, then written to --out (never replacing a
file) or printed. Exit 2: bad input. The format is in docs/keyset.md.`,
		Example: `  kubectl ql3 keyset init --key ops.pub --kid ops-2026-07 --key ~/.ssh/id_ed25519.pub --out keyset-1.json
  kubectl ql3 keyset verify keyset-1.json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			jwks, err := keys.jwks()
			if err != nil {
				return err
			}
			k, err := jwkset.Initial(jwks)
			if err != nil {
				return err
			}
			data, err := k.Encode()
			if err != nil {
				return err
			}
			if out == "" {
				_, err = streams.Out.Write(data)
				return err
			}
			if err := createNew("--out", out, data, 0o644, fmt.Sprintf("--out %s exists: a keyset file is never replaced; name a new file", out)); err != nil {
				return err
			}
			d, _ := k.Digest()
			_, err = fmt.Fprintf(streams.Out, "wrote %s: generation 1, %d key(s), digest %s\n", out, len(k.Keys), d)
			return err
		},
	}
	keys.add(cmd, " (repeatable)")
	cmd.Flags().StringVar(&out, "out", "", "keyset `FILE` to create (default: print it)")
	return cmd
}

func newCmdKeysetJWK(streams genericiooptions.IOStreams) *cobra.Command {
	var keys keysetKeys
	cmd := &cobra.Command{
		Use:   "jwk --key FILE [--kid KID]",
		Short: "Print a public key file as a keyset JWK (for plan-rotation --add), offline",
		Long: `Print one public key file — PEM or one OpenSSH line — as the JWK a keyset
holds, with "use": "sig" and the key ID --kid (default: its RFC 7638
thumbprint). Write it to a file and pass it to "keyset plan-rotation --add".
Exit 2: bad input.`,
		Example: `  kubectl ql3 keyset jwk --key new-ops.pub --kid ops-2027-01 > new-ops.jwk.json
  kubectl ql3 keyset plan-rotation --current keyset-8.json --add new-ops.jwk.json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(keys.keys) != 1 {
				return fail.Errorf(fail.Invalid, "--key: give exactly one public key file (%d given)", len(keys.keys))
			}
			jwks, err := keys.jwks()
			if err != nil {
				return err
			}
			data, err := json.MarshalIndent(jwks[0], "", "  ")
			if err != nil {
				return err
			}
			_, err = streams.Out.Write(append(data, '\n'))
			return err
		},
	}
	keys.add(cmd, "")
	return cmd
}
