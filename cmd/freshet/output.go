package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/freshetdb/freshet/change"
)

// outputFile is tail's --output file. Lines are only ever appended; a
// transaction is acknowledged to PostgreSQL only after the file has been
// fsynced past its line, so after any crash the file holds a prefix of the
// stream, possibly ending in one torn line that openOutput cuts away.
type outputFile struct {
	f    *os.File
	path string
	torn int64 // bytes of a torn last line cut away by openOutput
}

// openOutput opens path for appending (creating it if needed), truncates a
// torn last line (one without its newline, left by a kill mid-write) and
// returns the commit LSN of the last complete line, or 0 when the file holds
// none.
func openOutput(path string) (*outputFile, change.LSN, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, 0, fmt.Errorf("open output file: %w", err)
	}
	lsn, end, err := lastLine(f)
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("read last transaction of %s: %w", path, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("stat output file: %w", err)
	}
	torn := st.Size() - end
	if torn > 0 {
		// A torn line: the transaction it began was never acknowledged,
		// so the slot sends it again.
		if err := f.Truncate(end); err != nil {
			f.Close()
			return nil, 0, fmt.Errorf("truncate torn last line of %s: %w", path, err)
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return nil, 0, fmt.Errorf("sync output file: %w", err)
		}
	}
	if _, err := f.Seek(end, io.SeekStart); err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("seek output file: %w", err)
	}
	return &outputFile{f: f, path: path, torn: torn}, lsn, nil
}

// Write implements io.Writer.
func (o *outputFile) Write(p []byte) (int, error) { return o.f.Write(p) }

// Sync makes everything written so far durable.
func (o *outputFile) Sync() error {
	if err := o.f.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", o.path, err)
	}
	return nil
}

// Close closes the file.
func (o *outputFile) Close() error { return o.f.Close() }

// lastLine finds the last complete (newline-terminated) line of f and
// returns its "lsn" and the offset just past its newline (the length the
// file should have). Lines can be very large (a million-row transaction is
// one line), so the file is scanned backwards in blocks and the line's
// fields are read as a token stream, never loaded whole.
func lastLine(f *os.File) (change.LSN, int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, 0, err
	}
	size := st.Size()
	end, err := lastIndexByte(f, size, '\n')
	if err != nil {
		return 0, 0, err
	}
	if end < 0 {
		return 0, 0, nil // no complete line: the whole file is torn (or empty)
	}
	start, err := lastIndexByte(f, end, '\n')
	if err != nil {
		return 0, 0, err
	}
	start++ // past the previous newline, or 0
	lsn, err := lineLSN(io.NewSectionReader(f, start, end-start))
	if err != nil {
		return 0, 0, fmt.Errorf("line at byte %d: %w", start, err)
	}
	return lsn, end + 1, nil
}

// lastIndexByte returns the offset of the last c in f before offset before,
// or -1.
func lastIndexByte(f *os.File, before int64, c byte) (int64, error) {
	const block = 64 << 10
	buf := make([]byte, block)
	for pos := before; pos > 0; {
		n := int64(block)
		if pos < n {
			n = pos
		}
		pos -= n
		if _, err := f.ReadAt(buf[:n], pos); err != nil && err != io.EOF {
			return 0, err
		}
		if i := bytes.LastIndexByte(buf[:n], c); i >= 0 {
			return pos + int64(i), nil
		}
	}
	return -1, nil
}

// lineLSN reads the top-level "lsn" field of one JSON transaction line.
func lineLSN(r io.Reader) (change.LSN, error) {
	dec := json.NewDecoder(bufio.NewReaderSize(r, 64<<10))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return 0, errors.New("not a JSON object; was this file written by freshet tail?")
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return 0, fmt.Errorf("read key: %w", err)
		}
		if key == "lsn" {
			var lsn change.LSN
			if err := dec.Decode(&lsn); err != nil {
				return 0, fmt.Errorf("read lsn: %w", err)
			}
			return lsn, nil
		}
		if err := skipValue(dec); err != nil {
			return 0, fmt.Errorf("skip %v: %w", key, err)
		}
	}
	return 0, errors.New(`no "lsn" field; was this file written by freshet tail?`)
}

// skipValue consumes one JSON value token by token, holding none of it.
func skipValue(dec *json.Decoder) error {
	depth := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
		if depth == 0 {
			return nil
		}
	}
}
