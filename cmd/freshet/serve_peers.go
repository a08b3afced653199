package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"
)

// Health polling of the shape API's peers.
const (
	peerPollEvery = 500 * time.Millisecond
	peerDeadAfter = 2 * time.Second
)

// peers routes each shape to one origin replica (--shape-peers): the peer
// with the highest rendezvous score of (peer URL, shape key) among those
// alive, the same choice on every replica, so a shape lives on one
// replica and a replica that dies hands only its shapes to the next.
// A peer is alive while its {base}/v1/health answered within
// peerDeadAfter (or, at start, until it has had that long to answer);
// this replica always is.
type peers struct {
	urls   []string
	self   int
	health string // path of the health endpoint
	seen   []atomic.Int64
	client *http.Client

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// parsePeers reads --shape-peers and --shape-self.
func parsePeers(list, self, basePath string) (*peers, error) {
	p := &peers{self: -1, health: basePath + "/v1/health", client: &http.Client{Timeout: time.Second}}
	for _, u := range strings.Split(list, ",") {
		if u = strings.TrimRight(strings.TrimSpace(u), "/"); u == "" {
			continue
		}
		pu, err := url.Parse(u)
		if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" || (pu.Path != "" && pu.Path != "/") {
			return nil, fmt.Errorf("--shape-peers: %q: want each replica's address as http://host:port (its --base-path is added)", u)
		}
		p.urls = append(p.urls, u)
	}
	self = strings.TrimRight(strings.TrimSpace(self), "/")
	for i, u := range p.urls {
		if u == self {
			p.self = i
		}
	}
	if p.self < 0 {
		return nil, fmt.Errorf("--shape-self %q: name this replica's own address as it appears in --shape-peers", self)
	}
	p.seen = make([]atomic.Int64, len(p.urls))
	return p, nil
}

// start polls the peers until stop.
func (p *peers) start() {
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	// Peers count as alive until they have had peerDeadAfter to answer,
	// so replicas starting together agree on origins from the start.
	now := time.Now().UnixNano()
	for i := range p.seen {
		p.seen[i].Store(now)
	}
	for i := range p.urls {
		if i == p.self {
			continue
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			t := time.NewTicker(peerPollEvery)
			defer t.Stop()
			for {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.urls[i]+p.health, nil)
				if resp, err := p.client.Do(req); err == nil {
					resp.Body.Close()
					if resp.StatusCode == http.StatusOK {
						p.seen[i].Store(time.Now().UnixNano())
					}
				}
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
			}
		}()
	}
}

func (p *peers) stop() {
	if p.cancel != nil {
		p.cancel()
	}
	p.wg.Wait()
}

// Origin returns the base URL of the shape's origin, or "" when it is
// this replica (shape.Config.Origin).
func (p *peers) Origin(key string) string {
	now := time.Now().UnixNano()
	best, bestScore := -1, uint64(0)
	for i, u := range p.urls {
		if i != p.self && time.Duration(now-p.seen[i].Load()) > peerDeadAfter {
			continue
		}
		if s := xxhash.Sum64String(u + "\x00" + key); best < 0 || s > bestScore {
			best, bestScore = i, s
		}
	}
	if best == p.self {
		return ""
	}
	return p.urls[best]
}
