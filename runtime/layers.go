package runtime

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

// flattenStatic is Envoy's ProtoLayer: nested structs become dotted keys,
// except a struct that is empty or has a numerator or denominator field,
// which is one value (a fractional percent). Lists and nulls are rejected.
// Where two spellings give the same key ("a.b" and a: {b}), the first in key
// order wins.
func flattenStatic(m map[string]any) (map[string]entry, error) {
	out := map[string]entry{}
	if err := walkStatic(m, "", out); err != nil {
		return nil, err
	}
	return out, nil
}

func walkStatic(m map[string]any, prefix string, out map[string]entry) error {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		key := k
		if prefix != "" {
			key = prefix + "." + k
		}
		switch v := m[k].(type) {
		case nil, []any:
			return fmt.Errorf("%s: invalid runtime entry value (lists and nulls are not allowed)", key)
		case map[string]any:
			_, num := v["numerator"]
			_, den := v["denominator"]
			if len(v) == 0 || num || den {
				if err := addStatic(out, key, v); err != nil {
					return err
				}
				continue
			}
			if err := walkStatic(v, key, out); err != nil {
				return err
			}
		default:
			if err := addStatic(out, key, v); err != nil {
				return err
			}
		}
	}
	return nil
}

func addStatic(out map[string]entry, key string, v any) error {
	if _, dup := out[key]; dup {
		return nil
	}
	e, err := valueEntry(v, "")
	if err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	out[key] = e
	return nil
}

// maxWalkDepth is Envoy's limit on disk layer directory nesting.
const maxWalkDepth = 16

func dirExists(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

// readDiskLayer is Envoy's DiskLayer: every regular file under path is a
// key, its path relative to path with '/' replaced by '.'; the value is the
// file's text with '#' comment lines and empty lines dropped and trailing
// white space trimmed from the last line.
func readDiskLayer(path string) (map[string]entry, error) {
	out := map[string]entry{}
	if err := walkDisk(path, "", 1, out); err != nil {
		return nil, err
	}
	return out, nil
}

func walkDisk(dir, prefix string, depth int, out map[string]entry) error {
	if depth > maxWalkDepth {
		return fmt.Errorf("walk recursion depth exceeded %d", maxWalkDepth)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, de := range entries {
		full := filepath.Join(dir, de.Name())
		key := de.Name()
		if prefix != "" {
			key = prefix + "." + key
		}
		fi, err := os.Stat(full) // follows symlinks, as Envoy's directory iterator does
		if err != nil {
			continue // a dangling link is neither file nor directory
		}
		switch {
		case fi.IsDir():
			if err := walkDisk(full, key, depth+1, out); err != nil {
				return err
			}
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(full)
			if err != nil {
				return err
			}
			raw := diskValue(string(b))
			e, err := stringEntry(raw)
			if err != nil {
				return fmt.Errorf("%s: %w", full, err)
			}
			out[key] = e
		}
	}
	return nil
}

// diskValue applies Envoy's file rules: split on '\n' dropping empty lines,
// skip lines starting with '#', keep the other lines with their newline,
// except any line equal to the last line, which is right-trimmed and given no
// newline (Envoy compares by content, not position).
func diskValue(text string) string {
	var lines []string
	for _, l := range strings.Split(text, "\n") {
		if l != "" {
			lines = append(lines, l)
		}
	}
	var b strings.Builder
	for _, l := range lines {
		if l[0] == '#' {
			continue
		}
		if l == lines[len(lines)-1] {
			b.WriteString(strings.TrimRight(l, " \t\f\v\n\r"))
		} else {
			b.WriteString(l)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// linkState identifies what a symlink root currently is, so that a swap is
// seen even when the new link points at a path of the same name.
type linkState struct {
	exists bool
	target string
	dev    uint64
	ino    uint64
	mtime  int64
}

func statLink(path string) linkState {
	fi, err := os.Lstat(path)
	if err != nil {
		return linkState{}
	}
	s := linkState{exists: true, mtime: fi.ModTime().UnixNano()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		s.dev, s.ino = uint64(st.Dev), st.Ino
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		s.target, _ = os.Readlink(path)
	}
	return s
}
