package main

// What a cryptsetup user types: flags spelled as cryptsetup spells them
// (where they mean the same thing), its short flags (where ours are
// free), and its verbs, which get a hint naming ours.

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// flagAliases maps cryptsetup's spellings of a flag to ours; each means
// the same thing, in the same unit.
var flagAliases = map[string]string{
	"readonly":               "read-only",
	"iter-time":              "kdf-time",       // milliseconds when a plain number, as cryptsetup counts
	"pbkdf-memory":           "kdf-memory",     // KiB when a plain number, as cryptsetup counts
	"pbkdf-force-iterations": "kdf-iterations", // Argon2id's time cost, no calibration
	"new-keyfile":            "new-key-file",   // the whole file is the new passphrase
}

// normalizeFlag gives a flag spelled as cryptsetup spells it our name.
func normalizeFlag(_ *pflag.FlagSet, name string) pflag.NormalizedName {
	if n, ok := flagAliases[name]; ok {
		name = n
	}
	return pflag.NormalizedName(name)
}

// cryptsetupShort are cryptsetup's short flags for flags we have, where
// the letter is free in xtsctl (cryptsetup's -q is --batch-mode, ours is
// --quiet: that one stays ours). -d (--key-file), -S (--key-slot), -T
// (--tries), -r (--read-only), -v and -V are registered where the flags
// are.
var cryptsetupShort = map[string]string{
	"keyfile-size": "l",
	"key-size":     "s",
	"offset":       "o",
	"skip":         "p",
	"kdf-time":     "i", // cryptsetup's -i is --iter-time
	"type":         "M",
}

// msDuration is --kdf-time: a Go duration (2s, 500ms), or a plain number
// of milliseconds as cryptsetup's --iter-time takes it.
type msDuration struct{ d *time.Duration }

func (m msDuration) String() string { return m.d.String() }
func (m msDuration) Type() string   { return "duration" }
func (m msDuration) Set(s string) error {
	if n, err := strconv.ParseUint(s, 10, 32); err == nil {
		*m.d = time.Duration(n) * time.Millisecond
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("%q is not a duration (2s, 500ms) nor a number of milliseconds", s)
	}
	*m.d = d
	return nil
}

// cryptsetupVerbs are cryptsetup's verbs, lower-cased, with what does the
// same here.
var cryptsetupVerbs = map[string]string{
	"luksformat":        "xtsctl format --type luks2 IMAGE --size SIZE (a new image), or xtsctl encrypt --type luks2 IN OUT",
	"luksopen":          "xtsctl open IMAGE NAME",
	"plainopen":         "xtsctl open --type plain --key-file KEYFILE IMAGE NAME",
	"tcryptopen":        "xtsctl open --type tcrypt IMAGE NAME",
	"bitlkopen":         "xtsctl open IMAGE NAME",
	"create":            "xtsctl open --type plain --key-file KEYFILE IMAGE NAME",
	"luksclose":         "xtsctl close NAME",
	"remove":            "xtsctl close NAME",
	"luksdump":          "xtsctl info IMAGE",
	"tcryptdump":        "xtsctl info --type tcrypt IMAGE",
	"bitlkdump":         "xtsctl info IMAGE",
	"fvault2dump":       "xtsctl info IMAGE",
	"luksuuid":          "xtsctl info IMAGE",
	"isluks":            "xtsctl info IMAGE",
	"luksaddkey":        "xtsctl passphrase add IMAGE",
	"lukschangekey":     "xtsctl passphrase change IMAGE",
	"luksremovekey":     "xtsctl passphrase remove IMAGE",
	"lukskillslot":      "xtsctl passphrase remove --key-slot N IMAGE",
	"luksheaderbackup":  "xtsctl header backup IMAGE FILE",
	"luksheaderrestore": "xtsctl header restore IMAGE FILE",
	"benchmark":         "xtsctl bench",
	"reencrypt":         "xtsctl encrypt --in-place TARGET, or xtsctl decrypt --in-place TARGET",
}

// verbHint names our command for a cryptsetup verb that cobra did not
// know (err is its "unknown command" error), or "".
func verbHint(err error) string {
	const prefix = `unknown command "`
	msg := err.Error()
	if !strings.HasPrefix(msg, prefix) {
		return ""
	}
	verb, _, _ := strings.Cut(msg[len(prefix):], `"`)
	if ours, ok := cryptsetupVerbs[strings.ToLower(verb)]; ok {
		return fmt.Sprintf("%s is cryptsetup's; here: %s", verb, ours)
	}
	return ""
}
