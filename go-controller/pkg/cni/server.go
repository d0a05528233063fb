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
	"strconv"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"
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

// maxMessageBytes bounds a request to the CNI server and its answer.
const maxMessageBytes = 1 << 20

// forward is the shim: it hands the call to the node daemon's CNI server and
// prints its answer once it is a CNI result of the requested version (ADD)
// or empty (CHECK, DEL). A daemon that cannot be reached is a CNI error 11
// (try again later) naming the socket.
func forward(args *skel.CmdArgs, conf *NetConf, command string) error {
	body, err := json.Marshal(request{Command: command, ContainerID: args.ContainerID, Netns: args.Netns,
		IfName: args.IfName, Args: args.Args, Path: args.Path, StdinData: args.StdinData})
	if err != nil {
		return types.NewError(types.ErrInternal, "ovn_cni: encoding the request", err.Error())
	}
	if len(body) > maxMessageBytes {
		return tooLarge("ovn_cni "+command+": the request", requestLimit)
	}
	status, out, err := post(conf, command, body)
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		return replyError(command, status, out)
	}
	return printReply(command, conf.CNIVersion, out)
}

// post sends the request to the CNI server and reads at most
// maxMessageBytes of its answer.
func post(conf *NetConf, command string, body []byte) (int, []byte, error) {
	client := http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", conf.CNIServerSocket)
	}}}
	// The server waits for the annotation and ovn-controller: allow for both.
	ctx, cancel := context.WithTimeout(context.Background(), conf.annotationTimeout+conf.ovnInstalledTimeout+30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://ovnkube-node/cni", bytes.NewReader(body))
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, types.NewError(types.ErrTryAgainLater, fmt.Sprintf("ovn_cni %s: the node daemon's CNI server is not reachable at %s", command, conf.CNIServerSocket),
			"is `ovnkube node --cni-server-socket "+conf.CNIServerSocket+"` running? "+err.Error())
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, maxMessageBytes+1))
	if err != nil {
		return 0, nil, types.NewError(types.ErrIOFailure, "ovn_cni "+command+": reading the CNI server's answer", err.Error())
	}
	if len(out) > maxMessageBytes {
		return 0, nil, tooLarge("ovn_cni "+command+": the CNI server's answer", "no CNI result is that large: is "+conf.CNIServerSocket+" ovnkube node's CNI server?")
	}
	return resp.StatusCode, out, nil
}

// replyError is the CNI error the server answered with, or one saying it
// answered something else.
func replyError(command string, status int, out []byte) error {
	te := &types.Error{}
	if json.Unmarshal(out, te) != nil || te.Code == 0 {
		return types.NewError(types.ErrInternal, fmt.Sprintf("ovn_cni %s: the CNI server answered HTTP %d without a CNI error", command, status), string(out))
	}
	return te
}

// printReply prints a successful answer: for ADD a result of the requested
// version (decoded and printed again, so nothing else reaches the runtime);
// for CHECK and DEL nothing, which is all the server may answer.
func printReply(command, cniVersion string, out []byte) error {
	if command != "ADD" {
		if len(bytes.TrimSpace(out)) != 0 {
			return types.NewError(types.ErrDecodingFailure, "ovn_cni "+command+": the CNI server answered something on success",
				fmt.Sprintf("%s answers nothing on success; got %d bytes", command, len(out)))
		}
		return nil
	}
	notResult := func(why string) error {
		return types.NewError(types.ErrDecodingFailure, fmt.Sprintf("ovn_cni ADD: the CNI server's answer is not a CNI %s result", cniVersion), why)
	}
	res, err := version.NewResult(cniVersion, out)
	if err != nil {
		return notResult(err.Error())
	}
	if res.Version() != cniVersion {
		return notResult("it has cniVersion " + strconv.Quote(res.Version()))
	}
	return res.Print()
}

const requestLimit = "the network configuration (stdin, prevResult included) and CNI_ARGS must fit in 1 MiB"

func tooLarge(what, why string) error {
	return types.NewError(types.ErrDecodingFailure, fmt.Sprintf("%s is larger than %d bytes (1 MiB)", what, maxMessageBytes), why)
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
	req, err := decodeRequest(http.MaxBytesReader(w, r.Body, maxMessageBytes))
	if err != nil {
		writeCNIError(w, err)
		return
	}
	out, err := s.handle(r.Context(), req)
	metrics.CNIRequests.WithLabelValues(commandLabel(req.Command), metrics.Result(err)).Observe(time.Since(start).Seconds())
	if err != nil {
		s.Log.Info("CNI request failed", "command", req.Command, "container", req.ContainerID, "error", err.Error())
		writeCNIError(w, err)
		return
	}
	_, _ = w.Write(out)
}

// commandLabel bounds the metric's command label to the commands served.
func commandLabel(command string) string {
	if command == "ADD" || command == "CHECK" || command == "DEL" {
		return command
	}
	return "other"
}

// decodeRequest reads one request: a single JSON object, at most
// maxMessageBytes (the reader enforces it).
func decodeRequest(body io.Reader) (request, error) {
	var req request
	dec := json.NewDecoder(body)
	err := dec.Decode(&req)
	if err == nil && dec.More() {
		err = errors.New("data after the request object")
	}
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return req, tooLarge("CNI server: the request", requestLimit)
	case err != nil:
		return req, types.NewError(types.ErrDecodingFailure, "CNI server: cannot decode the request", err.Error())
	}
	return req, nil
}

// handle checks and runs one request and returns what the plugin prints on
// success.
func (s *Server) handle(ctx context.Context, req request) ([]byte, error) {
	args := &skel.CmdArgs{ContainerID: req.ContainerID, Netns: req.Netns, IfName: req.IfName, Args: req.Args, Path: req.Path, StdinData: req.StdinData}
	conf, pa, err := parseInput(req.Command, args)
	if err != nil {
		return nil, err
	}
	shared := func() (*ovs.Client, func(), error) { return s.OVS, func() {}, nil }
	switch req.Command {
	case "CHECK":
		return nil, check(ctx, args, conf, pa, shared)
	case "DEL":
		return nil, del(ctx, args, shared, conf.OVSAddress)
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
