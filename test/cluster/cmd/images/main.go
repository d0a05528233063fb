// Command images builds the container images of the conformance cluster as
// docker archives that `ctr -n k8s.io images import` loads, from Debian
// packages and our own binaries, with no registry and no container tooling:
//
//	pause.tar    /pause (test/cluster/pause, built here): registry.k8s.io/pause
//	agnhost.tar  a Debian minbase root with the network tools the e2e suite
//	             runs (curl, nc, dig, wget, ip, ...), /agnhost and /coredns
//	             (as upstream's agnhost image has it): every
//	             e2e-test-images tag the network suite and the
//	             network-policy-api suites pull
//	coredns.tar  /coredns (test/tools/coredns, built by make deps)
//	regression-issue-74839.tar  /regression-issue-74839 (Kubernetes' test
//	             server for the invalid conntrack state bug, built by make deps)
//	ovnkube.tar  a Debian minbase root with iptables and ovs-ofctl, and
//	             ovnkube, ovn_cni and the conflist: what dist/kubernetes/ runs
//
// Each archive is rebuilt only when its key, a sha256 over all of its inputs,
// differs from the one stored beside it in NAME.key. The Debian roots are cached
// apart (under -cache, keyed by suite, packages and mirror), so that a new
// agnhost binary does not run debootstrap again. Run it, as root, from the
// top of the checkout.
package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ovn-k8s/ovn-k8s/test/cluster/image"
)

const (
	module      = "github.com/ovn-k8s/ovn-k8s"
	mirrorShell = "hack/stacks/mirror.sh"
	pauseTag    = "registry.k8s.io/pause:3.10.1"
	corednsTag  = "localhost/ovn-k8s/coredns:v1.14.7"
)

// rootSpec is a Debian root an image is made from: debootstrap's minbase,
// packages, then customize run in it; commands must be there afterwards.
type rootSpec struct{ name, packages, commands, customize string }

// agnhostRoot holds the commands the e2e suite runs in its pods, and what
// upstream's agnhost Dockerfile adds besides packages: the upload directory,
// the second name, and the user and group tests look up.
var agnhostRoot = rootSpec{
	name:     "agnhost",
	packages: "curl,netcat-openbsd,dnsutils,wget,iproute2,ca-certificates,iperf,bash",
	commands: "curl nc dig nslookup wget getent ip sh seq iperf bash",
	customize: "mkdir -p /uploads && ln -s agnhost /agnhost-2 && groupadd -g 50000 group-defined-in-image && " +
		"useradd -u 1000 -M -N user-defined-in-image && usermod -a -G group-defined-in-image user-defined-in-image",
}

// ovnkubeRoot holds what the node daemon runs besides itself: iptables (the
// host NodePort chain) and ovs-ofctl (the gateway bridge's flows).
var ovnkubeRoot = rootSpec{
	name:      "ovnkube",
	packages:  "iptables,openvswitch-common",
	commands:  "iptables iptables-restore ovs-ofctl sh cp mv",
	customize: "true",
}

// agnhostTags are the images the network e2e suite runs; agnhost serves them
// all (its subcommands stand in for nginx, busybox and jessie-dnsutils, whose
// commands are the Debian root's). agnhost:2.45 is what the network-policy-api
// conformance suites (v0.2.0 and v0.1.7) run: serve-hostname, porter, netexec
// and connect, which this agnhost has too.
var agnhostTags = []string{
	"registry.k8s.io/e2e-test-images/agnhost:2.56",
	"registry.k8s.io/e2e-test-images/agnhost:2.45",
	"registry.k8s.io/e2e-test-images/jessie-dnsutils:1.7",
	"registry.k8s.io/e2e-test-images/nginx:1.14-4",
	"registry.k8s.io/e2e-test-images/nginx:1.15-4",
	"registry.k8s.io/e2e-test-images/busybox:1.37.0-1",
}

// sources are the files whose change changes what this program writes.
var sources = []string{"test/cluster/image/*.go", "test/cluster/pause/*.go", "test/cluster/cmd/images/*.go", mirrorShell}

func main() {
	out := flag.String("out", "_output/images", "where the archives and their keys go")
	bin := flag.String("bin", "_output/bin", "where agnhost and coredns are")
	cache := flag.String("cache", "_output/images/cache", "where the Debian root is kept between builds")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *out, *bin, *cache); err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
}

type builder struct {
	ctx             context.Context
	out, bin, cache string
	sources         *key   // the sources' part of every key
	debian          debian // found by agnhostInputs
}

// target is one archive: what its key is made of and how it is built.
type target struct {
	name   string
	inputs func(k *key) error
	build  func(tmp, out string) error
}

func run(ctx context.Context, out, bin, cache string) error {
	if err := checkTop(); err != nil {
		return err
	}
	b := &builder{ctx: ctx, out: out, bin: bin, cache: cache, sources: &key{}}
	if err := b.sources.files(sources...); err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	targets := []target{
		{"pause", b.pauseInputs, b.pause},
		b.oneBinary("coredns", "test/tools/coredns", corednsConfig),
		b.oneBinary("regression-issue-74839", "test/tools/kube", boomConfig),
		{"agnhost", b.agnhostInputs, b.agnhost},
		{"ovnkube", b.ovnkubeInputs, b.ovnkube},
	}
	var failed []string
	for _, t := range targets {
		if err := b.make(t); err != nil {
			fmt.Fprintf(os.Stderr, "images: %s.tar: %v\n", t.name, err)
			failed = append(failed, t.name+".tar")
		}
		if ctx.Err() != nil {
			return fmt.Errorf("interrupted")
		}
	}
	if failed != nil {
		return fmt.Errorf("not built: %s", strings.Join(failed, ", "))
	}
	return nil
}

// checkTop makes sure this runs at the top of the checkout, where the
// sources named in the keys are.
func checkTop() error {
	b, err := os.ReadFile("go.mod")
	if err == nil && strings.HasPrefix(string(b), "module "+module+"\n") {
		return nil
	}
	return fmt.Errorf("run from the top of the %s checkout (the directory of its go.mod)", module)
}

// make builds t's archive if its key changed, and stores the new key.
func (b *builder) make(t target) error {
	k := &key{}
	k.add("image", t.name)
	k.include(b.sources)
	if err := t.inputs(k); err != nil {
		return err
	}
	sum := k.sum()
	tarPath := filepath.Join(b.out, t.name+".tar")
	keyPath := filepath.Join(b.out, t.name+".key")
	if old, err := os.ReadFile(keyPath); err == nil && strings.SplitN(string(old), "\n", 2)[0] == sum {
		if _, err := os.Stat(tarPath); err == nil {
			fmt.Printf("%s.tar: up to date\n", t.name)
			return nil
		}
	}
	start := time.Now()
	tmp, err := os.MkdirTemp(b.out, "."+t.name+"-build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := t.build(tmp, tarPath); err != nil {
		return err
	}
	// The key goes last: an archive whose key is written is complete.
	if err := writeAtomic(keyPath, []byte(sum+"\n"+k.text.String())); err != nil {
		return err
	}
	fi, err := os.Stat(tarPath)
	if err != nil {
		return err
	}
	fmt.Printf("%s.tar: built in %s (%.1f MB)\n", t.name, time.Since(start).Round(100*time.Millisecond), float64(fi.Size())/1e6)
	return nil
}

// key accumulates the inputs of an archive as text, one "what value" a line
// (files by their sha256); the key is the sha256 of that text, which is kept
// after it in NAME.key to show what a build was made from.
type key struct{ text strings.Builder }

func (k *key) add(what string, values ...string) {
	fmt.Fprintf(&k.text, "%s %s\n", what, strings.Join(values, " "))
}

func (k *key) include(o *key) { k.text.WriteString(o.text.String()) }

// file adds a file by its content, under name.
func (k *key) file(what, name, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return err
	}
	k.add(what, name, hex.EncodeToString(h.Sum(nil)))
	return nil
}

// files adds every file the patterns match, but tests.
func (k *key) files(patterns ...string) error {
	for _, p := range patterns {
		matches, err := filepath.Glob(p)
		if err != nil || len(matches) == 0 {
			return fmt.Errorf("no %s: run from the top of the checkout", p)
		}
		sort.Strings(matches)
		for _, m := range matches {
			if strings.HasSuffix(m, "_test.go") {
				continue
			}
			if err := k.file("source", m, m); err != nil {
				return err
			}
		}
	}
	return nil
}

func (k *key) sum() string {
	s := sha256.Sum256([]byte(k.text.String()))
	return hex.EncodeToString(s[:])
}

func writeAtomic(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// goCommand is the go command to build pause with: $GO, as in the Makefile, or go.
func goCommand() string {
	if g := os.Getenv("GO"); g != "" {
		return g
	}
	return "go"
}

var pauseConfig = image.Config{Tags: []string{pauseTag}, Entrypoint: []string{"/pause"}, CreatedBy: "test/cluster/pause"}

func (b *builder) pauseInputs(k *key) error {
	// The binary is built from the sources (in the key already) by this go.
	v, err := exec.Command(goCommand(), "env", "GOVERSION").Output()
	if err != nil {
		return fmt.Errorf("go env GOVERSION: %v: is go in PATH (or GO set)?", err)
	}
	k.add("go", strings.TrimSpace(string(v)))
	k.add("config", fmt.Sprintf("%q", pauseConfig))
	return nil
}

func (b *builder) pause(tmp, out string) error {
	bin := filepath.Join(tmp, "pause")
	cmd := exec.CommandContext(b.ctx, goCommand(), "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "./test/cluster/pause")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building the pause program (go build ./test/cluster/pause): %v", err)
	}
	layer := image.Layer{Files: map[string]image.File{"/pause": {Source: bin, Mode: 0o755}}}
	return image.Write(out, layer, []image.Config{pauseConfig})
}

var corednsConfig = image.Config{Tags: []string{corednsTag}, Entrypoint: []string{"/coredns"}, CreatedBy: "test/tools/coredns"}

// boomConfig is the server of Kubernetes' regression test for issue 74839
// (the invalid conntrack state bug), which sends out-of-window TCP segments.
var boomConfig = image.Config{Tags: []string{"registry.k8s.io/e2e-test-images/regression-issue-74839:1.2"},
	Entrypoint: []string{"/regression-issue-74839"}, CreatedBy: "test/tools/kube: k8s.io/kubernetes/test/images/regression-issue-74839"}

func (b *builder) corednsBinary() (string, error) { return b.binary("coredns", "test/tools/coredns") }

// binary is a program make deps builds into -bin.
func (b *builder) binary(name, from string) (string, error) {
	p := filepath.Join(b.bin, name)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("no %s: make deps builds it (from %s)", p, from)
	}
	return p, nil
}

// oneBinary is an image of a single static program from -bin, at /name.
func (b *builder) oneBinary(name, from string, config image.Config) target {
	inputs := func(k *key) error {
		p, err := b.binary(name, from)
		if err != nil {
			return err
		}
		k.add("config", fmt.Sprintf("%q", config))
		return k.file("binary", name, p) // by content: -bin is no input
	}
	build := func(tmp, out string) error {
		p, err := b.binary(name, from)
		if err != nil {
			return err
		}
		layer := image.Layer{Files: map[string]image.File{"/" + name: {Source: p, Mode: 0o755}}}
		return image.Write(out, layer, []image.Config{config})
	}
	return target{name, inputs, build}
}

var agnhostConfig = image.Config{Tags: agnhostTags, Entrypoint: []string{"/agnhost"}, Cmd: []string{"pause"},
	CreatedBy: "debootstrap --variant=minbase --include=" + agnhostRoot.packages + "; /agnhost"}

func (b *builder) agnhostBinary() (string, error) {
	p := filepath.Join(b.bin, "agnhost")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("no %s: make deps builds it (from test/tools/kube)", p)
	}
	return p, nil
}

// debian is what the agnhost root is made from: this system's release, from
// the mirror apt already uses.
type debian struct{ suite, mirror string }

// host finds the suite and mirror once (the mirror may need apt-get update).
func (b *builder) host() (debian, error) {
	suite, err := codename()
	if err != nil {
		return debian{}, err
	}
	cmd := exec.CommandContext(b.ctx, "bash", mirrorShell)
	cmd.Stderr = os.Stderr
	url, err := cmd.Output()
	if err != nil {
		return debian{}, fmt.Errorf("finding the Debian mirror (%s): %v: apt's sources (/etc/apt/sources.list*) need one for %s", mirrorShell, err, suite)
	}
	return debian{suite: suite, mirror: strings.TrimSpace(string(url))}, nil
}

// debianInputs finds this system's Debian (for debianRoot) and adds it and
// spec's packages to k.
func (b *builder) debianInputs(k *key, spec rootSpec) error {
	d, err := b.host()
	if err != nil {
		return err
	}
	b.debian = d
	k.add("debian", d.suite, d.mirror, spec.packages)
	return nil
}

func (b *builder) agnhostInputs(k *key) error {
	p, err := b.agnhostBinary()
	if err != nil {
		return err
	}
	if err := b.debianInputs(k, agnhostRoot); err != nil {
		return err
	}
	k.add("config", fmt.Sprintf("%q", agnhostConfig))
	porter, err := porterDir(b.ctx)
	if err != nil {
		return err
	}
	for _, f := range []string{"localhost.crt", "localhost.key"} {
		if err := k.file("porter", f, filepath.Join(porter, f)); err != nil {
			return err
		}
	}
	coredns, err := b.corednsBinary()
	if err != nil {
		return err
	}
	if err := k.file("binary", "coredns", coredns); err != nil {
		return err
	}
	return k.file("binary", "agnhost", p)
}

func (b *builder) agnhost(tmp, out string) error {
	p, err := b.agnhostBinary()
	if err != nil {
		return err
	}
	root, err := b.debianRoot(b.debian, agnhostRoot)
	if err != nil {
		return err
	}
	porter, err := porterDir(b.ctx)
	if err != nil {
		return err
	}
	coredns, err := b.corednsBinary()
	if err != nil {
		return err
	}
	layer := image.Layer{Root: root, Files: map[string]image.File{
		"/agnhost": {Source: p, Mode: 0o755},
		// Upstream's agnhost image carries CoreDNS: the DNS tests run their
		// own servers from it (/coredns -conf ...).
		"/coredns": {Source: coredns, Mode: 0o755},
		// The porter's TLS certificate, which the proxy tests' https ports serve.
		"/localhost.crt": {Source: filepath.Join(porter, "localhost.crt"), Mode: 0o644},
		"/localhost.key": {Source: filepath.Join(porter, "localhost.key"), Mode: 0o644},
	}}
	return image.Write(out, layer, []image.Config{agnhostConfig})
}

// ovnkubeTag is the image dist/kubernetes/ runs: ovnkube, ovn_cni and the
// conflist the DaemonSet's init container installs.
const ovnkubeTag = "localhost/ovn-k8s/ovnkube:latest"

var ovnkubeConfig = image.Config{Tags: []string{ovnkubeTag}, Entrypoint: []string{"/usr/bin/ovnkube"},
	CreatedBy: "debootstrap --variant=minbase --include=" + ovnkubeRoot.packages + "; make build"}

// ovnkubeFiles are the image's own files: what `make build` made, and the
// conflist as shipped.
func (b *builder) ovnkubeFiles() (map[string]image.File, error) {
	files := map[string]image.File{
		"/usr/bin/ovnkube":                       {Source: filepath.Join(b.bin, "ovnkube"), Mode: 0o755},
		"/usr/bin/ovn_cni":                       {Source: filepath.Join(b.bin, "ovn_cni"), Mode: 0o755},
		"/usr/share/ovn-k8s/10-ovn-k8s.conflist": {Source: "dist/cni/10-ovn-k8s.conflist", Mode: 0o644},
	}
	for _, f := range files {
		if _, err := os.Stat(f.Source); err != nil {
			return nil, fmt.Errorf("no %s: make build makes the binaries", f.Source)
		}
	}
	return files, nil
}

func (b *builder) ovnkubeInputs(k *key) error {
	files, err := b.ovnkubeFiles()
	if err != nil {
		return err
	}
	if err := b.debianInputs(k, ovnkubeRoot); err != nil {
		return err
	}
	k.add("config", fmt.Sprintf("%q", ovnkubeConfig))
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if err := k.file("file", name, files[name].Source); err != nil {
			return err
		}
	}
	return nil
}

func (b *builder) ovnkube(tmp, out string) error {
	files, err := b.ovnkubeFiles()
	if err != nil {
		return err
	}
	root, err := b.debianRoot(b.debian, ovnkubeRoot)
	if err != nil {
		return err
	}
	return image.Write(out, image.Layer{Root: root, Files: files}, []image.Config{ovnkubeConfig})
}

// porterDir is agnhost's porter source in the Kubernetes module that
// test/tools/kube pins (it holds the certificate upstream's image carries).
func porterDir(ctx context.Context) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "k8s.io/kubernetes")
	cmd.Dir = "test/tools/kube"
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("finding the k8s.io/kubernetes module of test/tools/kube: %v (make deps downloads it)", err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "test", "images", "agnhost", "porter"), nil
}

// codename is this system's Debian release, e.g. bookworm.
func codename() (string, error) {
	b, err := os.ReadFile("/etc/os-release")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VERSION_CODENAME="); ok {
			if v = strings.Trim(v, `"'`); v != "" {
				return v, nil
			}
		}
	}
	return "", errors.New("no VERSION_CODENAME in /etc/os-release: the agnhost image is made from this system's Debian release")
}

// debianRoot returns the cached root of spec for d, making it with
// debootstrap (a few minutes) when there is none. Roots of spec's other keys
// are removed.
func (b *builder) debianRoot(d debian, spec rootSpec) (string, error) {
	k := &key{}
	k.add("debian", d.suite, d.mirror, spec.packages)
	k.add("clean", "/var/cache/apt/archives/*.deb", "/var/lib/apt/lists/*")
	k.add("customize", spec.customize)
	name := spec.name + "-root-" + k.sum()[:16]
	cache, err := filepath.Abs(b.cache)
	if err != nil {
		return "", err
	}
	root := filepath.Join(cache, name)
	if _, err := os.Stat(filepath.Join(root, "usr/bin/sh")); err == nil {
		return root, nil
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", err
	}
	// Other roots, and what an interrupted build left (its mounts first).
	old, _ := filepath.Glob(filepath.Join(cache, spec.name+"-root-*"))
	for _, o := range old {
		if err := removeTree(o); err != nil {
			return "", err
		}
	}
	if os.Geteuid() != 0 {
		return "", errors.New("debootstrap needs root: run as root")
	}
	if _, err := exec.LookPath("debootstrap"); err != nil {
		return "", errors.New("no debootstrap: make deps-packages installs it")
	}
	tmp := root + ".tmp"
	log := root + ".log"
	fmt.Printf("%s.tar: debootstrap %s from %s (about 2 minutes; log in %s)\n", spec.name, d.suite, d.mirror, log)
	start := time.Now()
	err = debootstrap(b.ctx, d, spec.packages, tmp, log)
	// debootstrap mounts proc and sys in the root while it installs: none may
	// stay, whatever happened (the root is removed with them otherwise).
	if uerr := unmountUnder(tmp); uerr != nil {
		return "", fmt.Errorf("debootstrap left mounts in %s: %v: unmount them by hand", tmp, uerr)
	}
	if err != nil {
		removeTree(tmp)
		return "", err
	}
	// Package caches are no part of the image.
	for _, pattern := range []string{"var/cache/apt/archives/*.deb", "var/lib/apt/lists/*"} {
		matches, _ := filepath.Glob(filepath.Join(tmp, pattern))
		for _, m := range matches {
			if err := os.RemoveAll(m); err != nil {
				return "", err
			}
		}
	}
	check := exec.CommandContext(b.ctx, "chroot", tmp, "/bin/sh", "-c", spec.customize+" && "+
		`for c in `+spec.commands+`; do command -v $c >/dev/null || { echo "no $c"; exit 1; }; done`)
	if msg, err := check.CombinedOutput(); err != nil {
		return "", fmt.Errorf("the debootstrap root in %s lacks a command (%s): %s: check the package list", tmp, err, strings.TrimSpace(string(msg)))
	}
	if err := os.Rename(tmp, root); err != nil {
		return "", err
	}
	fmt.Printf("%s.tar: debootstrap took %s\n", spec.name, time.Since(start).Round(time.Second))
	return root, nil
}

func debootstrap(ctx context.Context, d debian, packages, root, logPath string) error {
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logFile.Close()
	cmd := exec.CommandContext(ctx, "debootstrap", "--variant=minbase", "--include="+packages, d.suite, root, d.mirror)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Its own process group, stopped with SIGTERM on interrupt (or when
	// this program dies), so that debootstrap's exit trap unmounts what it
	// mounted.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return errors.New("debootstrap interrupted")
		}
		return fmt.Errorf("debootstrap %s %s: %v:\n%s\n(all of it in %s; the mirror or network may be down)", d.suite, d.mirror, err, tail(logPath, 20), logPath)
	}
	return nil
}

func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// removeTree removes dir after unmounting whatever is mounted under it; it
// removes nothing while a mount stays (it would remove the mount's files).
func removeTree(dir string) error {
	if err := unmountUnder(dir); err != nil {
		return fmt.Errorf("%s: %v: unmount it by hand, then remove it", dir, err)
	}
	return os.RemoveAll(dir)
}

// unmountUnder unmounts every mount at or below dir, deepest first.
func unmountUnder(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	for range 3 {
		mounts, err := mountsUnder(abs)
		if err != nil || len(mounts) == 0 {
			return err
		}
		for _, m := range mounts {
			if syscall.Unmount(m, 0) != nil {
				syscall.Unmount(m, syscall.MNT_DETACH)
			}
		}
	}
	if mounts, _ := mountsUnder(abs); len(mounts) > 0 {
		return fmt.Errorf("still mounted: %s", strings.Join(mounts, " "))
	}
	return nil
}

// mountsUnder lists the mount points at or below dir, deepest first.
func mountsUnder(dir string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var mounts []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 5 {
			continue
		}
		p := unescape(fields[4])
		if p == dir || strings.HasPrefix(p, dir+"/") {
			mounts = append(mounts, p)
		}
	}
	sort.Slice(mounts, func(i, j int) bool { return len(mounts[i]) > len(mounts[j]) })
	return mounts, s.Err()
}

// unescape undoes mountinfo's octal escapes (\040 for a space).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
