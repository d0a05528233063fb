package ovndb

import (
	"time"

	"github.com/go-logr/logr"
	"github.com/ovn-org/libovsdb/client"
)

// WithProbe is withProbe for the external tests, with their own timings.
func WithProbe(c client.Client, every, timeout time.Duration) client.Client {
	return withProbe(c, every, timeout, logr.Discard())
}
