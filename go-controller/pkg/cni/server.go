package cni

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/go-logr/logr"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/metrics"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovs"
)

// request is one CNI call as the shim hands it to the node daemon.
type request struct {
	Command     string `json:"command"`
	ContainerID string `json:"containerID"`
	Netns       string `json:"netns"`
	IfName      string `json:"ifName"`
	Args        string `json:"args"`
	Path        string `json:"path"`
	StdinData   []byte `json:"stdin"`
}

// forward is the shim: it hands the call to the node daemon's CNI server and
// prints its answer. A daemon that cannot be reached is a CNI error 11 (try
// again later) naming the socket.
func forward(args *skel.CmdArgs, conf *NetConf, command string) error {
	body, err := json.Marshal(request{Command: command, ContainerID: args.ContainerID, Netns: args.Netns,
		IfName: args.IfName, Args: args.Args, Path: args.Path, StdinData: args.StdinData})
	if err != nil {
		return types.NewError(types.ErrInternal, "ovn_cni: encoding the request", err.Error())
	}
	client := http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", conf.CNIServerSocket)
	}}}
	// The server waits for the annotation and ovn-controller: allow for both.
	ctx, cancel := context.WithTimeout(context.Background(), conf.annotationTimeout+conf.ovnInstalledTimeout+30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://ovnkube-node/cni", bytes.NewReader(body))
	resp, err := client.Do(req)
	if err != nil {
		return types.NewError(types.ErrTryAgainLater, fmt.Sprintf("ovn_cni %s: the node daemon's CNI server is not reachable at %s", command, conf.CNIServerSocket),
			"is `ovnkube node --cni-server-socket "+conf.CNIServerSocket+"` running? "+err.Error())
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return types.NewError(types.ErrIOFailure, "ovn_cni "+command+": reading the CNI server's answer", err.Error())
	}
	if resp.StatusCode != http.StatusOK {
		te := &types.Error{}
		if json.Unmarshal(out, te) != nil || te.Code == 0 {
			return types.NewError(types.ErrInternal, fmt.Sprintf("ovn_cni %s: the CNI server answered %s", command, resp.Status), string(out))
		}
		return te
	}
	if len(out) > 0 {
		_, err = os.Stdout.Write(out)
	}
	return err
}

// Server is the node daemon's CNI server: it does what the standalone
// plugin does, with the daemon's OVS connection and its pod informer.
type Server struct {
	Socket     string
	OVS        *ovs.Client
	PodNetwork PodNetworkFunc
	Log        logr.Logger
}

// Listen binds the socket (replacing a stale one) and serves until ctx ends.
func (s *Server) Listen(ctx context.Context) error {
	if err := os.MkdirAll(filepath.Dir(s.Socket), 0o700); err != nil {
		return fmt.Errorf("CNI server socket directory: %w", err)
	}
	if err := os.Remove(s.Socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing a stale CNI server socket: %w", err)
	}
	ln, err := net.Listen("unix", s.Socket)
	if err != nil {
		return fmt.Errorf("CNI server: %w", err)
	}
	if err := os.Chmod(s.Socket, 0o600); err != nil {
		ln.Close()
		return err
	}
	srv := &http.Server{Handler: http.HandlerFunc(s.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.Log.Error(err, "CNI server stopped", "socket", s.Socket)
		}
	}()
	s.Log.Info("serving CNI requests", "socket", s.Socket)
	return nil
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	var req request
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeCNIError(w, types.NewError(types.ErrDecodingFailure, "CNI server: cannot decode the request", err.Error()))
		return
	}
	out, err := s.handle(r.Context(), req)
	metrics.CNIRequests.WithLabelValues(req.Command, metrics.Result(err)).Observe(time.Since(start).Seconds())
	if err != nil {
		s.Log.Info("CNI request failed", "command", req.Command, "container", req.ContainerID, "error", err.Error())
		writeCNIError(w, err)
		return
	}
	_, _ = w.Write(out)
}

// handle runs one request and returns what the plugin prints on success.
func (s *Server) handle(ctx context.Context, req request) ([]byte, error) {
	args := &skel.CmdArgs{ContainerID: req.ContainerID, Netns: req.Netns, IfName: req.IfName, Args: req.Args, Path: req.Path, StdinData: req.StdinData}
	shared := func() (*ovs.Client, func(), error) { return s.OVS, func() {}, nil }
	switch req.Command {
	case "ADD", "CHECK":
		conf, pa, err := parseInput(args, true)
		if err != nil {
			return nil, err
		}
		if req.Command == "CHECK" {
			return nil, check(ctx, args, conf, pa, shared)
		}
		res, err := add(ctx, args, conf, pa, s.PodNetwork, shared)
		if err != nil {
			return nil, err
		}
		v, err := res.GetAsVersion(conf.CNIVersion)
		if err != nil {
			return nil, types.NewError(types.ErrIncompatibleCNIVersion, "CNI server: converting the result", err.Error())
		}
		return json.Marshal(v)
	case "DEL":
		conf, _, err := parseInput(args, false)
		if err != nil {
			return nil, err
		}
		return nil, del(ctx, args, shared, conf.OVSAddress)
	}
	return nil, types.NewError(types.ErrInvalidEnvironmentVariables, "CNI server: unknown command "+req.Command, "")
}

func writeCNIError(w http.ResponseWriter, err error) {
	te := &types.Error{}
	if !errors.As(err, &te) {
		te = types.NewError(types.ErrInternal, err.Error(), "")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusInternalServerError)
	_ = json.NewEncoder(w).Encode(te)
}
