package cluster

import (
	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/internal/filterstate"
	"github.com/legateproxy/legate/internal/matcher/transportsocket"
)

// startStatic publishes a STATIC cluster's load_assignment at once: the cluster is warm as soon
// as it is added.
func (c *Cluster) startStatic() error {
	u, err := assignmentUpdate(c.cfg, c.cfg.LoadAssignment)
	if err != nil {
		return err
	}
	st := &c.stats.stats
	st.UpdateAttempt.Inc()
	if err := c.update(u); err != nil {
		st.UpdateFailure.Inc()
		return err
	}
	st.UpdateSuccess.Inc()
	return nil
}

// assignmentUpdate converts a load assignment of cluster cfg whose addresses are IPs (STATIC,
// EDS) into a host update.
func assignmentUpdate(cfg *config.Cluster, la config.LoadAssignment) (hostUpdate, error) {
	u := hostUpdate{settings: assignmentSettings(la)}
	for _, l := range la.Localities {
		for _, e := range l.Endpoints {
			u.hosts = append(u.hosts, endpointHost(cfg, l, e, e.Address.String()))
		}
	}
	return u, nil
}

// assignmentSettings takes the assignment-wide settings of la.
func assignmentSettings(la config.LoadAssignment) setSettings {
	s := setSettings{
		overprovisioning:       la.OverprovisioningFactor,
		weightedPriorityHealth: la.WeightedPriorityHealth,
		drops:                  la.DropOverloads,
	}
	if la.HasLocalityWeights {
		s.localityWeights = map[uint32]map[host.Locality]uint32{}
		for _, l := range la.Localities {
			m := s.localityWeights[l.Priority]
			if m == nil {
				m = map[host.Locality]uint32{}
				s.localityWeights[l.Priority] = m
			}
			m[host.Locality{Region: l.Region, Zone: l.Zone, SubZone: l.SubZone}] = l.Weight
		}
	}
	return s
}

// endpointHost describes the host of endpoint e of locality l at address addr, with the
// transport socket of cluster cfg that the endpoint's metadata selects.
func endpointHost(cfg *config.Cluster, l config.LocalityEndpoints, e config.Endpoint, addr string) host.Config {
	return host.Config{
		SocketMatch:         socketFor(cfg, &e, &l),
		SocketByFilterState: socketByFilterState(cfg, &e, &l),
		Address:             addr,
		Hostname:            e.Hostname,
		Weight:              e.Weight,
		Locality:            host.Locality{Region: l.Region, Zone: l.Zone, SubZone: l.SubZone},
		Priority:            l.Priority,
		Metadata:            e.Metadata,
		Canary:              e.Canary,
		Health:              edsHealthFlags(e.HealthStatus),
		// Shared with the configuration: an internal_upstream socket passes it on.
		FilterMetadata:    e.FilterMetadata,
		ProxyProtocolTLVs: e.ProxyProtocolTLVs,
	}
}

// socketFor chooses the transport socket of endpoint e of locality l: by the cluster's
// transport_socket_matcher when it has one (no match: its transport_socket), else by
// transport_socket_matches' labels. It returns config.Cluster.MatchTransportSocket's kind of
// index.
func socketFor(cfg *config.Cluster, e *config.Endpoint, l *config.LocalityEndpoints) int {
	if cfg.TransportSocketMatcher != nil {
		i, _ := cfg.TransportSocketMatcher.Match(&transportsocket.Data{Endpoint: e.RawMetadata, Locality: l.RawMetadata})
		return i
	}
	return cfg.MatchTransportSocket(e.SocketMatch, l.SocketMatch)
}

// socketByFilterState chooses, when the cluster's transport_socket_matcher reads filter
// state, the socket of a connection of endpoint e that carries shared objects; nil
// otherwise (the host's choice stands for every connection).
func socketByFilterState(cfg *config.Cluster, e *config.Endpoint, l *config.LocalityEndpoints) func([]filterstate.Entry) int {
	if !cfg.SocketMatcherReadsFilterState {
		return nil
	}
	m, endpoint, locality := cfg.TransportSocketMatcher, e.RawMetadata, l.RawMetadata
	return func(shared []filterstate.Entry) int {
		i, _ := m.Match(&transportsocket.Data{Endpoint: endpoint, Locality: locality, FilterState: shared})
		return i
	}
}

// edsHealthFlags maps an EDS health_status to host flags, as Envoy does: UNHEALTHY, DRAINING
// and TIMEOUT fail the host (/failed_eds_health; DRAINING also sets /eds_status_draining),
// DEGRADED degrades it, UNKNOWN and HEALTHY leave it healthy.
func edsHealthFlags(s config.HealthStatus) host.HealthFlag {
	switch s {
	case config.HealthUnhealthy, config.HealthTimeout:
		return host.FailedEDSHealth
	case config.HealthDraining:
		return host.FailedEDSHealth | host.EDSStatusDraining
	case config.HealthDegraded:
		return host.DegradedEDSHealth
	}
	return 0
}
