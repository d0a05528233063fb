package metrics

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/kubernetes"
)

// Server is what the HTTP endpoint serves.
type Server struct {
	Address  string
	Registry *prometheus.Registry
	// Ready returns nil when the process is ready, else why not.
	Ready func() error
	// Pprof adds /debug/pprof/ (CPU and heap profiles) on the same address.
	Pprof bool
	// Delegated guards /metrics and /debug/pprof/ (not the probes /healthz
	// and /readyz): a request needs a bearer token that the API server,
	// asked through Kube, authenticates and authorizes for the path.
	Delegated bool
	Kube      kubernetes.Interface
	// TLS serves HTTPS; Listen requires it with Delegated (a bearer token
	// sent in clear would be a credential given away).
	TLS *tls.Config
}

// Listen binds the address now (so a taken port fails the command at once,
// naming it) and serves until ctx ends.
func (s Server) Listen(ctx context.Context, log logr.Logger) error {
	switch {
	case s.Delegated && s.Kube == nil:
		return fmt.Errorf("metrics and health endpoint: %w", errNoClient)
	case s.Delegated && s.TLS == nil:
		return fmt.Errorf("metrics and health endpoint: delegated authentication needs HTTPS")
	}
	ln, err := net.Listen("tcp", s.Address)
	if err != nil {
		return fmt.Errorf("metrics and health endpoint: %w", err)
	}
	if s.TLS != nil {
		ln = tls.NewListener(ln, s.TLS)
	}
	srv := &http.Server{Handler: s.handler(log), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error(err, "metrics and health endpoint stopped", "address", s.Address)
		}
	}()
	log.Info("serving /metrics, /healthz and /readyz", "address", ln.Addr().String(), "pprof", s.Pprof,
		"https", s.TLS != nil, "auth", s.authName())
	if !s.Delegated && !Loopback(s.Address) {
		log.Info("WARNING: /metrics (and /debug/pprof/ when enabled) served without authentication beyond this host; see --metrics-auth", "address", s.Address)
	}
	return nil
}

// Loopback says whether a HOST:PORT is reachable from this machine only
// (127.0.0.0/8, ::1, localhost).
func Loopback(address string) bool {
	host, _, err := net.SplitHostPort(address)
	ip := net.ParseIP(host)
	return err == nil && (host == "localhost" || (ip != nil && ip.IsLoopback()))
}

func (s Server) authName() string {
	if s.Delegated {
		return "delegated"
	}
	return "none"
}

// Handler is the endpoint's routes.
func (s Server) Handler() http.Handler { return s.handler(logr.Discard()) }

// handler is Handler logging why the API server could not be asked.
func (s Server) handler(log logr.Logger) http.Handler {
	protect := func(h http.Handler) http.Handler { return h }
	if s.Delegated {
		protect = NewDelegated(s.Kube, log.WithName("auth"), nil).Protect
	}
	return s.routes(protect)
}

// routes serves /healthz and /readyz to anyone, everything else through
// protect.
func (s Server) routes(protect func(http.Handler) http.Handler) http.Handler {
	open := http.NewServeMux()
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(s.Registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if s.Ready != nil {
			if err := s.Ready(); err != nil {
				http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		fmt.Fprintln(w, "ok")
	})
	if s.Pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	open.Handle("/healthz", mux)
	open.Handle("/readyz", mux)
	open.Handle("/", protect(mux))
	return open
}
