package disk_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/xtsctl/xtsctl/blake2b"
	"github.com/xtsctl/xtsctl/disk"
	_ "github.com/xtsctl/xtsctl/inplace" // registers the in-place conversions
	"github.com/xtsctl/xtsctl/plain"
	"github.com/xtsctl/xtsctl/sector"
	"github.com/xtsctl/xtsctl/volume"
)

// runInPlace prepares and runs an in-place job of format f on o, with
// secret answering its requests; it returns the result.
func runInPlace(t *testing.T, f disk.Format, o *disk.InPlaceOptions, secret func(*disk.Need, error) (*disk.Secret, error)) (*disk.InPlaceResult, error) {
	t.Helper()
	ip, ok := disk.InPlacerOf(f)
	if !ok {
		t.Fatalf("%s has no in-place conversion", f.Info().Name)
	}
	job, err := ip.PrepareInPlace(o)
	if err != nil {
		return nil, err
	}
	defer job.Close()
	return job.Run(context.Background(), secret)
}

// A plain image converted in place through the layer holds the bytes
// dm-crypt's plain mapping gives (the sector codec), reads back through the layer, and
// converts back to the plaintext.
func TestPlainInPlaceThroughLayer(t *testing.T) {
	pt := randomBytes(1<<20, 11)
	key := randomBytes(64, 12)
	path := writeFile(t, pt)
	opt := disk.Options{plain.OptSkip: "8", plain.OptSectorSize: "1024"}
	c, err := sector.NewCodecKey(key, sector.Params{Size: 1024, IVOffset: 8})
	if err != nil {
		t.Fatal(err)
	}
	want := make([]byte, len(pt))
	c.Encrypt(want, pt, 0)
	asked := 0
	secret := func(need *disk.Need, wrong error) (*disk.Secret, error) {
		asked++
		if need.KeyFile != disk.WantRequired || need.Passphrase != disk.WantNone || wrong != nil {
			t.Fatalf("plain run asked for %+v (wrong: %v), want one key file", need, wrong)
		}
		names := []string{"key"}
		if asked == 2 {
			names = nil // a library caller need not name its key
		}
		return &disk.Secret{KeyFiles: [][]byte{bytes.Clone(key)}, KeyFileNames: names}, nil
	}
	if _, err := runInPlace(t, plain.Format, &disk.InPlaceOptions{Target: path, Encrypt: true, Create: &disk.CreateOptions{Options: opt}}, secret); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, want) {
		t.Fatal("in-place plain encryption differs from encrypt IN OUT")
	}
	if got := readAll(t, path, plain.FormatName, opt, &disk.Secret{KeyFiles: [][]byte{bytes.Clone(key)}, KeyFileNames: []string{"key"}}); !bytes.Equal(got, pt) {
		t.Fatal("the layer reads another plaintext")
	}
	if _, err := runInPlace(t, plain.Format, &disk.InPlaceOptions{Target: path, Options: opt}, secret); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, pt) {
		t.Fatal("in-place plain decryption did not give back the plaintext")
	}
	if asked != 2 {
		t.Errorf("the key was asked for %d times, want once per run", asked)
	}
}

// A volume made in place through the layer opens through the layer; its
// decryption asks again after a wrong passphrase, and returns the
// plaintext's BLAKE2b-512, the digest the volume recorded.
func TestVolumeInPlaceThroughLayer(t *testing.T) {
	pt := randomBytes(1<<20, 13)
	path := writeFile(t, pt)
	create := &disk.CreateOptions{Name: path, Digest: true, KDF: disk.NewKDF{Time: time.Second, Iterations: 1, MemoryKiB: 64}}
	res, err := runInPlace(t, volume.Format, &disk.InPlaceOptions{Target: path, Encrypt: true, Create: create},
		func(need *disk.Need, wrong error) (*disk.Secret, error) {
			if need.Passphrase != disk.WantRequired || !need.Confirm || wrong != nil {
				t.Fatalf("new volume asked for %+v (wrong: %v), want a new passphrase", need, wrong)
			}
			return &disk.Secret{Passphrase: []byte("pw")}, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	sum := blake2b.Sum512(pt)
	if !bytes.Equal(res.Digest, sum[:]) {
		t.Fatalf("recorded digest %x, want BLAKE2b-512 of the plaintext", res.Digest)
	}
	if got := readAll(t, path, volume.FormatName, nil, &disk.Secret{Passphrase: []byte("pw")}); !bytes.Equal(got, pt) {
		t.Fatal("the volume made in place reads another plaintext")
	}
	var wrongs []error
	res, err = runInPlace(t, volume.Format, &disk.InPlaceOptions{Target: path, Digest: true},
		func(need *disk.Need, wrong error) (*disk.Secret, error) {
			if wrong != nil {
				wrongs = append(wrongs, wrong)
				return &disk.Secret{Passphrase: []byte("pw")}, nil
			}
			return &disk.Secret{Passphrase: []byte("not it")}, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if len(wrongs) != 1 || !errors.Is(wrongs[0], disk.ErrWrongSecret) {
		t.Fatalf("after a wrong passphrase the run asked again with %v, want one ErrWrongSecret", wrongs)
	}
	if !bytes.Equal(res.Digest, sum[:]) {
		t.Fatalf("decryption's digest %x, want BLAKE2b-512 of the plaintext", res.Digest)
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, pt) {
		t.Fatal("in-place decryption did not give back the plaintext")
	}
	// The secret function's own error ends the run as it is.
	stop := errors.New("no passphrase today")
	path2 := writeFile(t, pt)
	if _, err := runInPlace(t, volume.Format, &disk.InPlaceOptions{Target: path2, Encrypt: true, Create: &disk.CreateOptions{Name: path2, KDF: create.KDF}},
		func(*disk.Need, error) (*disk.Secret, error) { return nil, stop }); err != stop {
		t.Fatalf("run ended with %v, want the secret function's error", err)
	}
	if got, _ := os.ReadFile(path2); !bytes.Equal(got, pt) {
		t.Fatal("a run without its secret changed the target")
	}
}

// A format without an in-place conversion has none.
func TestInPlacerOfOthers(t *testing.T) {
	for _, f := range disk.Formats() {
		_, ok := disk.InPlacerOf(f)
		name := f.Info().Name
		if want := name == volume.FormatName || name == plain.FormatName; ok != want {
			t.Errorf("%s: in-place conversion %v, want %v", name, ok, want)
		}
	}
}
