package bitlk

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/xtsctl/xtsctl/disk"
)

// TestSamplesDecrypt: every Windows-made sample unlocks with each of its
// secrets (password, recovery password, with and without --recovery,
// startup key) and its whole device, read through the disk layer, has
// the SHA-256 and NTFS serial cryptsetup's test suite gives.
func TestSamplesDecrypt(t *testing.T) {
	for _, s := range samples {
		t.Run(s.file, func(t *testing.T) {
			path := samplePath(t, s.file)
			type try struct {
				name string
				req  *disk.Request
				sec  *disk.Secret
			}
			var tries []try
			if s.password != "" {
				tries = append(tries, try{"password", request(), &disk.Secret{Passphrase: []byte(s.password)}})
			}
			tries = append(tries,
				try{"recovery", request(), &disk.Secret{Passphrase: []byte(s.recovery)}},
				try{"recovery-flag", request(OptRecovery, "true"), &disk.Secret{Passphrase: []byte(s.recovery + "\n")}})
			if s.bek != "" {
				bek, err := os.ReadFile(filepath.Join(sampleDir(t), s.bek))
				if err != nil {
					t.Fatal(err)
				}
				tries = append(tries, try{"startup-key", request(), &disk.Secret{KeyFiles: [][]byte{bek}}})
			}
			for _, tr := range tries {
				t.Run(tr.name, func(t *testing.T) {
					u := mustUnlock(t, path, tr.req, tr.sec)
					if u.Unservable != "" {
						t.Fatalf("unservable: %s", u.Unservable)
					}
					meth, _ := lookupMethod(s.method)
					if u.Layout.Cipher != meth.cipher || len(u.Key) != meth.key {
						t.Fatalf("cipher %s with a %d-byte key, want %s with %d", u.Layout.Cipher, len(u.Key), meth.cipher, meth.key)
					}
					if u.Layout.ReadOnly == "" {
						t.Error("the layout does not say it is read-only")
					}
					_, r := serve(t, path, u)
					if got := ntfsSerial(t, r); got != s.serial {
						t.Errorf("NTFS serial %s, want %s", got, s.serial)
					}
					if got := deviceSHA256(t, r); got != s.sha256 {
						t.Errorf("device SHA-256 %s, want %s", got, s.sha256)
					}
				})
			}
		})
	}
}
