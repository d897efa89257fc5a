package cluster

import (
	"fmt"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"

	"github.com/legateproxy/legate/config"
)

// ApplyAssignment is the hook the xDS client calls with each ClusterLoadAssignment of an EDS
// cluster: endpoints become hosts (health_status UNHEALTHY, DRAINING and TIMEOUT set
// /failed_eds_health, DEGRADED /degraded_eds_health), with their priorities, locality weights,
// overprovisioning factor and drop_overloads. The cluster stays warming until the first
// assignment. An invalid assignment counts update_rejected-style as update_failure and leaves the
// hosts unchanged. Safe for concurrent use.
func (c *Cluster) ApplyAssignment(cla *endpointv3.ClusterLoadAssignment) error {
	if c.cfg.Type != config.EDS {
		return fmt.Errorf("cluster %q: ApplyAssignment on a %s cluster; only EDS clusters take assignments", c.cfg.Name, c.cfg.Type)
	}
	st := &c.stats.stats
	st.UpdateAttempt.Inc()
	la, err := config.LoadAssignmentFromProto(cla)
	if err != nil {
		st.UpdateFailure.Inc()
		return fmt.Errorf("cluster %q: cluster_load_assignment.%w", c.cfg.Name, err)
	}
	for li, l := range la.Localities {
		for ei, e := range l.Endpoints {
			if e.Address.Kind == config.SocketAddress && !isIP(e.Address.Host) {
				st.UpdateFailure.Inc()
				return fmt.Errorf("cluster %q: cluster_load_assignment.endpoints[%d].lb_endpoints[%d].endpoint.address.socket_address.address = %q; EDS endpoints need an IP address",
					c.cfg.Name, li, ei, e.Address.Host)
			}
		}
	}
	u, err := assignmentUpdate(c.cfg, la)
	if err != nil {
		st.UpdateFailure.Inc()
		return err
	}
	if len(u.hosts) == 0 {
		st.UpdateEmpty.Inc()
	}
	if err := c.update(u); err != nil {
		st.UpdateFailure.Inc()
		return err
	}
	st.UpdateSuccess.Inc()
	return nil
}

// EDSServiceName returns the name the cluster presents to EDS: eds_cluster_config.service_name,
// or the cluster name.
func (c *Cluster) EDSServiceName() string {
	if c.cfg.EDS != nil && c.cfg.EDS.ServiceName != "" {
		return c.cfg.EDS.ServiceName
	}
	return c.cfg.Name
}
