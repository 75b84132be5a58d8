package devmapper

import "github.com/xtsctl/xtsctl/internal/dmtable"

// CryptTable is the dm-crypt table that CreateCrypt loads (package
// dmtable writes it).
type CryptTable = dmtable.CryptTable

// DefaultCipher is dm-crypt's aes-xts-plain64.
const DefaultCipher = dmtable.DefaultCipher

// cryptTarget is t as the one target of a DM_TABLE_LOAD.
func cryptTarget(t *CryptTable) loadTarget {
	return loadTarget{
		start:        0,
		length:       t.Length,
		typ:          "crypt",
		paramsLen:    t.ParamsLen(),
		appendParams: t.AppendParams,
	}
}
