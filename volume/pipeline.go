package volume

import "github.com/xtsctl/xtsctl/internal/stream"

// ReadError reports that the input could not be read, or ended early.
type ReadError = stream.ReadError

// WriteError reports that the output could not be written (for example a
// full disk).
type WriteError = stream.WriteError
