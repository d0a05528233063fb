package image

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// testRoot makes a root with a file, a directory, a symlink, a hard link and
// a socket (which is left out of the layer); plus a host file added as /bin/tool.
func testRoot(t *testing.T) (Layer, string) {
	t.Helper()
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	must(t, os.MkdirAll(filepath.Join(root, "etc/sub"), 0o750))
	must(t, os.WriteFile(filepath.Join(root, "etc/hello"), []byte("hello\n"), 0o640))
	must(t, os.Chmod(filepath.Join(root, "etc/hello"), 0o640))
	must(t, os.Symlink("etc/hello", filepath.Join(root, "link")))
	must(t, os.Link(filepath.Join(root, "etc/hello"), filepath.Join(root, "etc/hard")))
	// Unix socket paths are short: make it in a short directory and move it.
	l, err := net.Listen("unix", filepath.Join(dir, "s"))
	must(t, err)
	t.Cleanup(func() { l.Close() })
	must(t, os.Rename(filepath.Join(dir, "s"), filepath.Join(root, "etc/sock")))
	// Modification times must not reach the layer.
	must(t, os.Chtimes(filepath.Join(root, "etc/hello"), time.Now(), time.Now()))
	tool := filepath.Join(dir, "tool")
	must(t, os.WriteFile(tool, []byte("#!/bin/sh\n"), 0o600))
	return Layer{Root: root, Files: map[string]File{"/bin/tool": {Source: tool, Mode: 0o755}}}, dir
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// readTar returns the members of a tar, in order, with their contents.
func readTar(t *testing.T, r io.Reader) ([]*tar.Header, map[string][]byte) {
	t.Helper()
	tr := tar.NewReader(r)
	var hdrs []*tar.Header
	files := map[string][]byte{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return hdrs, files
		}
		must(t, err)
		b, err := io.ReadAll(tr)
		must(t, err)
		hdrs = append(hdrs, h)
		files[h.Name] = b
	}
}

func TestWrite(t *testing.T) {
	layer, dir := testRoot(t)
	images := []Config{
		{Tags: []string{"example.com:5000/a/one:1.0", "example.com/two:2"}, Entrypoint: []string{"/bin/tool"}, Cmd: []string{"pause"}},
		{Tags: []string{"localhost/three:v3"}, Entrypoint: []string{"/bin/tool"}, Env: []string{"PATH=/bin"}},
	}
	out := filepath.Join(dir, "out", "img.tar")
	must(t, Write(out, layer, images))

	f, err := os.Open(out)
	must(t, err)
	defer f.Close()
	_, files := readTar(t, f)

	var manifest []manifestEntry
	must(t, json.Unmarshal(files["manifest.json"], &manifest))
	if len(manifest) != 2 {
		t.Fatalf("manifest has %d entries, want 2: %s", len(manifest), files["manifest.json"])
	}
	layerName := manifest[0].Layers[0]
	for i, m := range manifest {
		if !reflect.DeepEqual(m.RepoTags, images[i].Tags) {
			t.Errorf("manifest[%d].RepoTags = %v, want %v", i, m.RepoTags, images[i].Tags)
		}
		if len(m.Layers) != 1 || m.Layers[0] != layerName {
			t.Errorf("manifest[%d].Layers = %v, want the one layer %s", i, m.Layers, layerName)
		}
	}
	layerTar, ok := files[layerName]
	if !ok {
		t.Fatalf("no %s in the archive", layerName)
	}
	layerSum := sha256.Sum256(layerTar)
	diffID := "sha256:" + hex.EncodeToString(layerSum[:])

	for i, m := range manifest {
		b, ok := files[m.Config]
		if !ok {
			t.Fatalf("no config %s in the archive", m.Config)
		}
		sum := sha256.Sum256(b)
		if want := hex.EncodeToString(sum[:]) + ".json"; m.Config != want {
			t.Errorf("config %s has digest %s", m.Config, want)
		}
		var cfg imageConfig
		must(t, json.Unmarshal(b, &cfg))
		if cfg.Architecture != "amd64" || cfg.OS != "linux" {
			t.Errorf("config %d: %s/%s, want linux/amd64", i, cfg.OS, cfg.Architecture)
		}
		if !reflect.DeepEqual(cfg.RootFS.DiffIDs, []string{diffID}) || cfg.RootFS.Type != "layers" {
			t.Errorf("config %d: rootfs %+v, want diff_ids [%s]", i, cfg.RootFS, diffID)
		}
		if len(cfg.History) != 1 {
			t.Errorf("config %d: %d history entries, want 1", i, len(cfg.History))
		}
		if !reflect.DeepEqual(cfg.Config.Entrypoint, images[i].Entrypoint) || !reflect.DeepEqual(cfg.Config.Cmd, images[i].Cmd) {
			t.Errorf("config %d: entrypoint %v cmd %v", i, cfg.Config.Entrypoint, cfg.Config.Cmd)
		}
	}
	var cfg0 imageConfig
	must(t, json.Unmarshal(files[manifest[0].Config], &cfg0))
	if !reflect.DeepEqual(cfg0.Config.Env, DefaultPath) {
		t.Errorf("config 0: env %v, want %v", cfg0.Config.Env, DefaultPath)
	}

	var repos map[string]map[string]string
	must(t, json.Unmarshal(files["repositories"], &repos))
	if repos["example.com:5000/a/one"]["1.0"] == "" || repos["localhost/three"]["v3"] == "" {
		t.Errorf("repositories: %s", files["repositories"])
	}

	// The layer: sorted, 0:0, dated 0, modes kept, no socket.
	hdrs, content := readTar(t, bytes.NewReader(layerTar))
	type member struct {
		name     string
		typ      byte
		mode     int64
		linkname string
	}
	var got []member
	for _, h := range hdrs {
		got = append(got, member{h.Name, h.Typeflag, h.Mode, h.Linkname})
		if h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" || !h.ModTime.Equal(time.Unix(0, 0)) {
			t.Errorf("%s: owner %d:%d (%q:%q), mtime %v", h.Name, h.Uid, h.Gid, h.Uname, h.Gname, h.ModTime)
		}
	}
	want := []member{
		{"bin/", tar.TypeDir, 0o755, ""},
		{"bin/tool", tar.TypeReg, 0o755, ""},
		{"etc/", tar.TypeDir, 0o750, ""},
		{"etc/hard", tar.TypeReg, 0o640, ""},
		{"etc/hello", tar.TypeReg, 0o640, ""},
		{"etc/sub/", tar.TypeDir, 0o750, ""},
		{"link", tar.TypeSymlink, 0o777, "etc/hello"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("layer members:\n got %v\nwant %v", got, want)
	}
	if string(content["etc/hello"]) != "hello\n" || string(content["etc/hard"]) != "hello\n" || string(content["bin/tool"]) != "#!/bin/sh\n" {
		t.Errorf("layer contents: %q", content)
	}

	// The same inputs again: the same bytes, though the files were touched.
	must(t, os.Chtimes(filepath.Join(layer.Root, "etc/hello"), time.Now(), time.Now().Add(time.Hour)))
	out2 := filepath.Join(dir, "out", "img2.tar")
	must(t, Write(out2, layer, images))
	a, err := os.ReadFile(out)
	must(t, err)
	b, err := os.ReadFile(out2)
	must(t, err)
	if !bytes.Equal(a, b) {
		t.Error("two writes of the same image differ")
	}
	// Nothing but the two archives is left in the output directory.
	left, err := os.ReadDir(filepath.Dir(out))
	must(t, err)
	if len(left) != 2 {
		var names []string
		for _, e := range left {
			names = append(names, e.Name())
		}
		t.Errorf("output directory holds %v, want only the two archives", names)
	}
}

func TestWriteErrors(t *testing.T) {
	layer, dir := testRoot(t)
	if err := Write(filepath.Join(dir, "x.tar"), layer, nil); err == nil {
		t.Error("no configs: no error")
	}
	if err := Write(filepath.Join(dir, "x.tar"), layer, []Config{{Tags: []string{"notag"}}}); err == nil {
		t.Error("tag without a version: no error")
	}
	layer.Files["/etc"] = File{Source: layer.Files["/bin/tool"].Source, Mode: 0o644}
	if err := Write(filepath.Join(dir, "x.tar"), layer, []Config{{Tags: []string{"a:b"}}}); err == nil {
		t.Error("file over a directory: no error")
	}
	if _, err := os.Stat(filepath.Join(dir, "x.tar")); !os.IsNotExist(err) {
		t.Errorf("a failed write left x.tar: %v", err)
	}
}
