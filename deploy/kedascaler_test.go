package deploy_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The nats-jetstream scaler of KEDA v2.20 (kedacore/keda v2.20.2,
// pkg/scalers/nats_jetstream_scaler.go), written again here from its code
// paths, so that the tests query a real nats-server the way KEDA does: its
// metadata parsing, the /jsz query it builds, the leader search through
// /varz in a cluster, the leader it remembers between polls, and what is an
// error. KEDA's code itself is not a dependency of this module.

// kedaMeta is parseNATSJetStreamMetadata's result.
type kedaMeta struct {
	account, accountID, stream, consumer, endpoint string
	lagThreshold                                   int64
	https                                          bool
	monitoringURL                                  string
}

// kedaParse reads a trigger's metadata as v2.20 does: stream, consumer and
// natsServerMonitoringEndpoint are required, and so is account or
// accountID ("no account name or id given"); accountID defaults to account.
func kedaParse(md map[string]string) (kedaMeta, error) {
	m := kedaMeta{account: md["account"], accountID: md["accountID"], stream: md["stream"], consumer: md["consumer"],
		endpoint: md["natsServerMonitoringEndpoint"], lagThreshold: 10}
	for _, k := range []string{"stream", "consumer", "natsServerMonitoringEndpoint"} {
		if md[k] == "" {
			return kedaMeta{}, fmt.Errorf("error parsing nats metadata: missing required parameter %q", k)
		}
	}
	if v, ok := md["lagThreshold"]; ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return kedaMeta{}, fmt.Errorf("error parsing nats metadata: lagThreshold: %w", err)
		}
		m.lagThreshold = n
	}
	if v, ok := md["useHttps"]; ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return kedaMeta{}, fmt.Errorf("error parsing nats metadata: useHttps: %w", err)
		}
		m.https = b
	}
	if m.account == "" && m.accountID == "" {
		return kedaMeta{}, errors.New("no account name or id given")
	}
	if m.accountID == "" {
		m.accountID = m.account
	}
	scheme := "http"
	if m.https {
		scheme = "https"
	}
	q := url.Values{}
	q.Set("acc", m.accountID)
	q.Set("consumers", "true")
	q.Set("config", "true")
	m.monitoringURL = (&url.URL{Scheme: scheme, Host: m.endpoint, Path: "/jsz", RawQuery: q.Encode()}).String()
	return m, nil
}

// jsz is what the scaler decodes from /jsz: the same JSON names, only the
// fields it reads.
type jsz struct {
	Accounts []struct {
		ID      string       `json:"id"`
		Name    string       `json:"name"`
		Streams []*jszStream `json:"stream_detail"`
	} `json:"account_details"`
	MetaCluster struct {
		ClusterSize int `json:"cluster_size"`
	} `json:"meta_cluster"`
}

type jszStream struct {
	Name  string `json:"name"`
	State struct {
		LastSequence int64 `json:"last_seq"`
	} `json:"state"`
	Consumers []struct {
		Name          string `json:"name"`
		NumAckPending int    `json:"num_ack_pending"`
		NumPending    int    `json:"num_pending"`
		Cluster       struct {
			Leader string `json:"leader"`
		} `json:"cluster"`
	} `json:"consumer_detail"`
}

// varz is what the scaler decodes from /varz.
type varz struct {
	ConnectURLs []string `json:"connect_urls"`
	Cluster     struct {
		URLs []string `json:"urls"`
	} `json:"cluster"`
	ServerName string `json:"server_name"`
}

// kedaScaler is one ScaledObject's scaler: KEDA keeps it between polls.
type kedaScaler struct {
	meta        kedaMeta
	client      *http.Client
	stream      *jszStream
	leader      string
	leaderURL   string
	clusterSize int

	mu    sync.Mutex
	asked []string // every URL requested, in order
}

func newKEDAScaler(meta kedaMeta, client *http.Client) *kedaScaler {
	return &kedaScaler{meta: meta, client: client, stream: &jszStream{}} // as NewNATSJetStreamScaler
}

// lag is GetMetricsAndActivity: the consumer's num_pending +
// num_ack_pending, or an error (then KEDA counts a failure towards the
// fallback).
func (s *kedaScaler) lag(ctx context.Context) (int64, error) {
	if err := s.monitoringData(ctx); err != nil {
		return 0, err
	}
	if s.stream == nil {
		return 0, errors.New("stream not found")
	}
	for _, c := range s.stream.Consumers {
		if c.Name == s.meta.consumer {
			return int64(c.NumPending + c.NumAckPending), nil
		}
	}
	return 0, fmt.Errorf("consumer %q not found in stream %q", s.meta.consumer, s.meta.stream)
}

// monitoringData is getNATSJetstreamMonitoringData.
func (s *kedaScaler) monitoringData(ctx context.Context) error {
	cached := s.leader
	u := s.meta.monitoringURL
	if s.leaderURL != "" {
		u = s.leaderURL
	}
	var r jsz
	if err := s.get(ctx, u, &r); err != nil {
		return err
	}
	found := s.set(r, "")
	if cached != "" && !found {
		s.leader, s.leaderURL, s.stream = "", "", nil
	}
	if found && cached != "" && cached == s.leader {
		return nil
	}
	if s.clusterSize <= 1 {
		return nil
	}
	base, err := url.Parse(s.meta.monitoringURL)
	if err != nil {
		return err
	}
	var v varz
	if err := s.get(ctx, base.Scheme+"://"+base.Host+"/varz", &v); err != nil {
		return err
	}
	advertised, urls := true, v.ConnectURLs
	if len(urls) == 0 {
		advertised, urls = false, v.Cluster.URLs
	}
	for _, cu := range urls {
		var node, nodeURL string
		if advertised {
			// a client URL's host, on the endpoint's port
			host := strings.Split(cu, ":")[0]
			if p := base.Port(); p != "" {
				host = net.JoinHostPort(host, p)
			}
			var nv varz
			if err := s.get(ctx, base.Scheme+"://"+host+"/varz", &nv); err != nil {
				return err
			}
			node = nv.ServerName
			nodeURL = (&url.URL{Scheme: base.Scheme, Host: host, Path: base.Path, RawQuery: base.Query().Encode()}).String()
		} else {
			// a route URL's first label, under the endpoint's host
			node = strings.Split(cu, ".")[0]
			nodeURL = (&url.URL{Scheme: base.Scheme, Host: node + "." + base.Host, Path: base.Path, RawQuery: base.Query().Encode()}).String()
		}
		var nr jsz
		if err := s.get(ctx, nodeURL, &nr); err != nil {
			return err
		}
		if s.leads(nr, node) {
			s.set(nr, nodeURL)
			return nil
		}
	}
	return fmt.Errorf("leader node not found for consumer %s", s.meta.consumer)
}

func (s *kedaScaler) isAccount(id, name string) bool {
	return id == s.meta.accountID || name == s.meta.account
}

// leads: node is the leader r names for the consumer.
func (s *kedaScaler) leads(r jsz, node string) bool {
	for _, a := range r.Accounts {
		if !s.isAccount(a.ID, a.Name) {
			continue
		}
		for _, st := range a.Streams {
			if st.Name != s.meta.stream {
				continue
			}
			for _, c := range st.Consumers {
				if c.Name == s.meta.consumer && c.Cluster.Leader == node {
					return true
				}
			}
		}
	}
	return false
}

// set is setNATSJetStreamMonitoringData: it keeps the stream found (the
// stream only, when the consumer is not in it) and the consumer's leader.
func (s *kedaScaler) set(r jsz, leaderURL string) bool {
	s.clusterSize = r.MetaCluster.ClusterSize
	for _, a := range r.Accounts {
		if !s.isAccount(a.ID, a.Name) {
			continue
		}
		for _, st := range a.Streams {
			if st.Name != s.meta.stream {
				continue
			}
			s.stream = st
			for _, c := range st.Consumers {
				if c.Name == s.meta.consumer {
					s.leader = c.Cluster.Leader
					if leaderURL != "" {
						s.leaderURL = leaderURL
					}
					return true
				}
			}
		}
	}
	return false
}

func (s *kedaScaler) get(ctx context.Context, u string, out any) error {
	s.mu.Lock()
	s.asked = append(s.asked, u)
	s.mu.Unlock()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(out)
}

// takeAsked returns the URLs requested since the last call.
func (s *kedaScaler) takeAsked() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.asked
	s.asked = nil
	return out
}

// resolving is an HTTP client that reaches each host:port of names at the
// address it maps to, and no other: the cluster DNS of a test (the names
// KEDA builds for a StatefulSet's pods under its headless service).
func resolving(names map[string]string) *http.Client {
	d := &net.Dialer{Timeout: 5 * time.Second}
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			real, ok := names[addr]
			if !ok {
				return nil, &net.DNSError{Err: "no such host", Name: addr, IsNotFound: true}
			}
			return d.DialContext(ctx, network, real)
		},
	}}
}
