package shape

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// A shape's files, under <data dir>/<first handle>/:
//
//	meta.json   the definition, its handles (the current one last) and the
//	            column schema it was built for
//	gens.json   the generations (snapshots) kept and the log file's name
//	snap-<base> a generation's snapshot: its chunks' messages, each chunk
//	            the messages joined by commas (under log=changes_only
//	            stored for a restart and not served)
//	log-<n>     the log: one change per line, "<offset> <crc32> <json>\n"
//
// meta.json and gens.json are replaced atomically (written aside, synced,
// renamed, the directory synced). The log is appended and synced before a
// change is served, so everything a client was sent survives a crash; a
// torn or corrupt tail (a line without its newline or whose checksum
// fails) is cut on open.

// meta is meta.json.
type meta struct {
	Version int        `json:"version"`
	Def     definition `json:"definition"`
	Handles []string   `json:"handles"`
	Schema  string     `json:"schema"` // electric-schema header it was built with
	Created int64      `json:"created_unix_ms"`
}

// genFile is one generation in gens.json.
type genFile struct {
	Base       uint64     `json:"base"`
	At         string     `json:"at"`
	Chunks     [][2]int64 `json:"chunks"`
	Stored     [][2]int64 `json:"stored,omitempty"` // changes_only: the rows' chunks, not served
	Superseded int64      `json:"superseded_unix_ms,omitempty"`
}

// gensFile is gens.json.
type gensFile struct {
	Gens []genFile `json:"gens"`
	Log  string    `json:"log"`
}

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// appendRecord writes one log line.
func appendRecord(dst []byte, o op) []byte {
	dst = append(dst, o.off.String()...)
	dst = append(dst, ' ')
	dst = fmt.Appendf(dst, "%08x", crc32.Checksum(o.msg, crcTable))
	dst = append(dst, ' ')
	dst = append(dst, o.msg...)
	return append(dst, '\n')
}

// readLog reads a log file's records and returns them with the length of
// its sound prefix; records after a torn or corrupt line are not read.
func readLog(path string) ([]op, int64, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	var ops []op
	var good int64
	br := bufio.NewReaderSize(f, 1<<16)
	for {
		line, err := br.ReadBytes('\n')
		if err == io.EOF {
			return ops, good, nil // a line without its newline is torn
		}
		if err != nil {
			return nil, 0, err
		}
		o, ok := parseRecord(line[:len(line)-1])
		if !ok || (len(ops) > 0 && o.off.Compare(ops[len(ops)-1].off) <= 0) {
			return ops, good, nil
		}
		ops = append(ops, o)
		good += int64(len(line))
	}
}

func parseRecord(line []byte) (op, bool) {
	a, rest, ok := bytes.Cut(line, []byte{' '})
	if !ok {
		return op{}, false
	}
	c, msg, ok := bytes.Cut(rest, []byte{' '})
	if !ok || len(c) != 8 {
		return op{}, false
	}
	off, err := parseOffset(string(a))
	if err != nil || off.Before || off.Virtual() {
		return op{}, false
	}
	sum, err := strconv.ParseUint(string(c), 16, 32)
	if err != nil || uint32(sum) != crc32.Checksum(msg, crcTable) {
		return op{}, false
	}
	return op{off: off, msg: bytes.Clone(msg)}, true
}

// writeAtomic replaces path with data: written aside, synced, renamed,
// the directory synced.
func writeAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", " ")
	if err != nil {
		return err
	}
	return writeAtomic(path, append(b, '\n'))
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// readChunk reads one snapshot chunk.
func readChunk(path string, r [2]int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, r[1])
	if _, err := f.ReadAt(b, r[0]); err != nil && !(errors.Is(err, io.EOF) && r[1] == 0) {
		return nil, err
	}
	return b, nil
}

// snapName is a generation's snapshot file name.
func snapName(base uint64) string { return "snap-" + strconv.FormatUint(base, 10) }

// nextLogName returns the log file name after name (log-1, log-2, ...).
func nextLogName(name string) string {
	n, _ := strconv.Atoi(strings.TrimPrefix(name, "log-"))
	return "log-" + strconv.Itoa(n+1)
}
