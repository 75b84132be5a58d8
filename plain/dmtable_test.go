package plain

import (
	"strings"
	"testing"

	"github.com/xtsctl/xtsctl/sector"
)

// TestPlainCryptTable: the dm table of a plain image carries cryptsetup's
// --offset, --skip, --sector-size and --iv-large-sectors in dm-crypt's
// units, and covers everything after the offset.
func TestPlainCryptTable(t *testing.T) {
	for _, c := range []struct {
		p    Mapping
		size int64
		want string
	}{
		{Mapping{Sector: sector.Params{Size: 512}}, 2 << 20,
			"0 4096 crypt aes-xts-plain64 <master-key> 0 7:3 0"},
		// iv_large_sectors means nothing with 512-byte sectors.
		{Mapping{Sector: sector.Params{Size: 512, IVMode: sector.Plain64LargeSectors, IVOffset: 16}, Offset: 8}, 8*512 + 1<<20,
			"0 2048 crypt aes-xts-plain64 <master-key> 16 7:3 8"},
		{Mapping{Sector: sector.Params{Size: 4096}}, 2 << 20,
			"0 4096 crypt aes-xts-plain64 <master-key> 0 7:3 0 1 sector_size:4096"},
		{Mapping{Sector: sector.Params{Size: 4096, IVMode: sector.Plain64LargeSectors, IVOffset: 24}, Offset: 16}, 16*512 + 64<<10,
			"0 128 crypt aes-xts-plain64 <master-key> 24 7:3 16 2 sector_size:4096 iv_large_sectors"},
		{Mapping{Sector: sector.Params{Size: 2048}, Offset: 4}, 4*512 + 6144,
			"0 12 crypt aes-xts-plain64 <master-key> 0 7:3 4 1 sector_size:2048"},
	} {
		tt, err := c.p.CryptTable(c.size)
		if err != nil {
			t.Errorf("%+v: %v", c.p, err)
			continue
		}
		tt.Device = "7:3"
		if got := tt.Template(); got != c.want {
			t.Errorf("%+v, %d bytes:\ngot  %s\nwant %s", c.p, c.size, got, c.want)
		}
	}
	key := []byte("0123456789abcdef0123456789abcdef")
	tt, _ := Mapping{Sector: sector.Params{Size: 512}}.CryptTable(512)
	tt.Key, tt.Device = key, "/dev/loop0"
	if got, err := tt.AppendLine(nil); err != nil || string(got) != "0 1 crypt aes-xts-plain64 3031323334353637383961626364656630313233343536373839616263646566 0 /dev/loop0 0" {
		t.Errorf("with a key: got %s, %v", got, err)
	}

	for _, c := range []struct {
		p    Mapping
		size int64
		want string
	}{
		{Mapping{Sector: sector.Params{Size: 512}, Offset: 8}, 4096, "nothing after the offset"},
		{Mapping{Sector: sector.Params{Size: 4096}, Offset: 1}, 4096 + 1024, "not a whole number of 4096-byte sectors"},
		{Mapping{Sector: sector.Params{Size: 4096}}, 4096 + 512, "not a whole number of 4096-byte sectors"},
		{Mapping{Sector: sector.Params{Size: 3000}}, 6000, "unsupported sector size"},
	} {
		if _, err := c.p.CryptTable(c.size); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v, %d bytes: %v, want an error saying %q", c.p, c.size, err, c.want)
		}
	}
}
