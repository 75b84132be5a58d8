package volume

// SetTestKDF makes every new key slot use p regardless of what is asked,
// and returns a function restoring the previous behaviour: tests must not
// spend seconds and gigabytes per passphrase.
func SetTestKDF(p KDFParams) (restore func()) {
	old := kdfTestHook
	kdfTestHook = func(KDFParams) KDFParams { return p }
	return func() { kdfTestHook = old }
}
