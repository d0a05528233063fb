// Package image writes container images as docker-archive tarballs (the
// format of `docker save`, which `ctr images import` accepts) from a root
// filesystem directory, with no container tooling. Every image is one layer,
// and the same inputs give byte-identical archives: entries are sorted, owned
// by 0:0 and dated 1970-01-01.
package image

import (
	"archive/tar"
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Layer is the content of an image's only layer.
type Layer struct {
	// Root is a directory whose whole tree is the layer's; empty for none.
	// Regular files, directories and symbolic links are kept with their
	// modes; hard links become separate regular files; device nodes, sockets
	// and pipes are left out. Owners are not kept: everything is 0:0.
	Root string
	// Files are added to (or replace those in) Root, keyed by their absolute
	// path in the image. Missing parent directories are added with mode 0755.
	Files map[string]File
}

// File is a host file put in a layer.
type File struct {
	Source string      // the file on the host
	Mode   fs.FileMode // its permission bits in the image
}

// Config is one image: its tags and how its containers start.
type Config struct {
	Tags       []string // repository:tag names, e.g. registry.k8s.io/pause:3.10.1
	Entrypoint []string
	Cmd        []string
	Env        []string // "PATH=..." and the like; DefaultPath when nil
	CreatedBy  string   // the history entry's text; says what made the layer
}

// DefaultPath is the environment an image gets when its Config sets none.
var DefaultPath = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}

// epoch is the time of every entry and image: the same inputs, the same bytes.
var epoch = time.Unix(0, 0).UTC()

// Write writes to out a docker archive of one image per config, all sharing
// layer. out is replaced only once complete.
func Write(out string, layer Layer, images []Config) error {
	if len(images) == 0 {
		return fmt.Errorf("image %s: no image config", out)
	}
	dir := filepath.Dir(out)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	lt, err := os.CreateTemp(dir, ".layer-*.tar")
	if err != nil {
		return err
	}
	defer os.Remove(lt.Name())
	defer lt.Close()
	h := sha256.New()
	if err := WriteLayer(io.MultiWriter(lt, h), layer); err != nil {
		return fmt.Errorf("image %s: layer: %w", out, err)
	}
	diffID := "sha256:" + hex.EncodeToString(h.Sum(nil))
	size, err := lt.Seek(0, io.SeekCurrent)
	if err != nil {
		return err
	}
	if _, err := lt.Seek(0, io.SeekStart); err != nil {
		return err
	}

	tmp, err := os.CreateTemp(dir, "."+filepath.Base(out)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	if err := writeArchive(tmp, lt, size, diffID, images); err != nil {
		return fmt.Errorf("image %s: %w", out, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), out)
}

type manifestEntry struct {
	Config   string
	RepoTags []string
	Layers   []string
}

type imageConfig struct {
	Architecture string         `json:"architecture"`
	OS           string         `json:"os"`
	Created      time.Time      `json:"created"`
	Config       containerStart `json:"config"`
	RootFS       rootFS         `json:"rootfs"`
	History      []history      `json:"history"`
}

type containerStart struct {
	Env        []string `json:"Env,omitempty"`
	Entrypoint []string `json:"Entrypoint,omitempty"`
	Cmd        []string `json:"Cmd,omitempty"`
}

type rootFS struct {
	Type    string   `json:"type"`
	DiffIDs []string `json:"diff_ids"`
}

type history struct {
	Created   time.Time `json:"created"`
	CreatedBy string    `json:"created_by,omitempty"`
}

// writeArchive writes the docker archive: one config file per distinct
// config (named by its sha256), the layer, manifest.json and repositories.
func writeArchive(w io.Writer, layer io.Reader, size int64, diffID string, images []Config) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	tw := tar.NewWriter(bw)
	layerPath := strings.TrimPrefix(diffID, "sha256:") + "/layer.tar"
	var manifest []manifestEntry
	written := map[string]bool{}
	repositories := map[string]map[string]string{}
	for _, img := range images {
		env := img.Env
		if env == nil {
			env = DefaultPath
		}
		cfg := imageConfig{
			Architecture: "amd64",
			OS:           "linux",
			Created:      epoch,
			Config:       containerStart{Env: env, Entrypoint: img.Entrypoint, Cmd: img.Cmd},
			RootFS:       rootFS{Type: "layers", DiffIDs: []string{diffID}},
			History:      []history{{Created: epoch, CreatedBy: img.CreatedBy}},
		}
		b, err := json.Marshal(cfg)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		name := hex.EncodeToString(sum[:]) + ".json"
		if !written[name] {
			written[name] = true
			if err := writeBytes(tw, name, b); err != nil {
				return err
			}
		}
		for _, tag := range img.Tags {
			repo, t, ok := splitTag(tag)
			if !ok {
				return fmt.Errorf("tag %q is not repository:tag", tag)
			}
			if repositories[repo] == nil {
				repositories[repo] = map[string]string{}
			}
			repositories[repo][t] = hex.EncodeToString(sum[:])
		}
		manifest = append(manifest, manifestEntry{Config: name, RepoTags: img.Tags, Layers: []string{layerPath}})
	}
	if err := tw.WriteHeader(dirHeader(path.Dir(layerPath) + "/")); err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: layerPath, Size: size, Mode: 0o644, ModTime: epoch}); err != nil {
		return err
	}
	if n, err := io.Copy(tw, layer); err != nil {
		return err
	} else if n != size {
		return fmt.Errorf("layer: copied %d of %d bytes", n, size)
	}
	b, err := json.Marshal(manifest)
	if err != nil {
		return err
	}
	if err := writeBytes(tw, "manifest.json", b); err != nil {
		return err
	}
	// json.Marshal sorts map keys: the file is the same for the same tags.
	if b, err = json.Marshal(repositories); err != nil {
		return err
	}
	if err := writeBytes(tw, "repositories", b); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return bw.Flush()
}

// splitTag splits repository:tag at the last colon after the last slash (a
// registry may have a port).
func splitTag(ref string) (repo, tag string, ok bool) {
	i := strings.LastIndex(ref, ":")
	if i <= 0 || i < strings.LastIndex(ref, "/") || i == len(ref)-1 {
		return "", "", false
	}
	return ref[:i], ref[i+1:], true
}

func writeBytes(tw *tar.Writer, name string, b []byte) error {
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Size: int64(len(b)), Mode: 0o644, ModTime: epoch}); err != nil {
		return err
	}
	_, err := tw.Write(b)
	return err
}

func dirHeader(name string) *tar.Header {
	return &tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: 0o755, ModTime: epoch}
}

// entry is one member of a layer: its name in the tar (no leading slash,
// directories end in a slash) and where its content comes from.
type entry struct {
	name   string
	source string      // host path; empty for an added parent directory
	info   fs.FileInfo // nil for an added parent directory
	mode   fs.FileMode // for Files: the mode asked for
	extra  bool
}

// WriteLayer writes layer as an uncompressed tar to w.
func WriteLayer(w io.Writer, layer Layer) error {
	entries := map[string]entry{} // by path without the trailing slash
	if layer.Root != "" {
		err := filepath.WalkDir(layer.Root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(layer.Root, p)
			if err != nil || rel == "." {
				return err
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			switch t := info.Mode().Type(); {
			case t == 0, t == fs.ModeDir, t == fs.ModeSymlink:
			default:
				return nil // device, socket, pipe: not image content
			}
			rel = filepath.ToSlash(rel)
			entries[rel] = entry{name: rel, source: p, info: info}
			return nil
		})
		if err != nil {
			return err
		}
	}
	for p, f := range layer.Files {
		rel := strings.TrimPrefix(path.Clean("/"+p), "/")
		if rel == "" {
			return fmt.Errorf("file %q: not a file path", p)
		}
		info, err := os.Stat(f.Source)
		if err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return fmt.Errorf("file %s: not a regular file", f.Source)
		}
		if e, ok := entries[rel]; ok && (e.info == nil || e.info.IsDir()) {
			return fmt.Errorf("file %s: a directory in the image", p)
		}
		entries[rel] = entry{name: rel, source: f.Source, info: info, mode: f.Mode.Perm() | f.Mode&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky), extra: true}
		for dir := path.Dir(rel); dir != "."; dir = path.Dir(dir) {
			if e, ok := entries[dir]; ok {
				if e.info != nil && !e.info.IsDir() {
					return fmt.Errorf("file %s: %s is not a directory in the image", p, dir)
				}
				continue
			}
			entries[dir] = entry{name: dir}
		}
	}
	names := make([]string, 0, len(entries))
	for name := range entries {
		names = append(names, name)
	}
	// A directory's name is a prefix of its children's: it sorts first.
	sort.Strings(names)

	bw := bufio.NewWriterSize(w, 1<<20)
	tw := tar.NewWriter(bw)
	for _, name := range names {
		if err := writeEntry(tw, entries[name]); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return bw.Flush()
}

func writeEntry(tw *tar.Writer, e entry) error {
	if e.info == nil {
		return tw.WriteHeader(dirHeader(e.name + "/"))
	}
	mode := e.mode
	if !e.extra {
		mode = e.info.Mode()
	}
	hdr := &tar.Header{Name: e.name, Mode: tarMode(mode), ModTime: epoch}
	switch {
	case e.info.IsDir():
		hdr.Typeflag, hdr.Name = tar.TypeDir, e.name+"/"
		return tw.WriteHeader(hdr)
	case e.info.Mode()&fs.ModeSymlink != 0:
		target, err := os.Readlink(e.source)
		if err != nil {
			return err
		}
		hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, target
		return tw.WriteHeader(hdr)
	}
	f, err := os.Open(e.source)
	if err != nil {
		return err
	}
	defer f.Close()
	// The size is that of the file as opened: one that changes meanwhile
	// fails the copy below instead of writing a bad archive.
	info, err := f.Stat()
	if err != nil {
		return err
	}
	hdr.Typeflag, hdr.Size = tar.TypeReg, info.Size()
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	if _, err := io.Copy(tw, f); err != nil {
		return fmt.Errorf("%s: %w", e.source, err)
	}
	return nil
}

// tarMode is the tar mode of m: permission bits plus setuid, setgid, sticky.
func tarMode(m fs.FileMode) int64 {
	mode := int64(m.Perm())
	if m&fs.ModeSetuid != 0 {
		mode |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		mode |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		mode |= 0o1000
	}
	return mode
}
