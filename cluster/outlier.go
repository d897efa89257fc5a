package cluster

import (
	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/outlier"
)

// Outlier returns the cluster's outlier detector, or nil without outlier_detection.
//
// The data plane reports the result of every upstream request or connection to it, lock-free
// and allocation-free:
//
//	if d := snap.Outlier(); d != nil {
//		d.Report(h, outlier.HTTPStatus(resp.StatusCode))     // the upstream's status
//		d.Report(h, outlier.ConnectFailed)                   // connect failure or reset
//		d.Report(h, outlier.Timeout.WithStatus(504))         // no answer in time
//	}
//
// The detector sets /failed_outlier_check on ejected hosts and the cluster republishes its
// snapshot (through common_lb_config.update_merge_window), so later picks skip them.
func (c *Cluster) Outlier() *outlier.Detector { return c.outlier }

// Outlier returns the outlier detector of the snapshot's cluster, or nil without
// outlier_detection. See Cluster.Outlier.
func (s *Snapshot) Outlier() *outlier.Detector { return s.Cluster.outlier }

// ReportResult reports one request or connection result for h to the outlier detector; it does
// nothing without outlier_detection. Lock-free and allocation-free.
func (c *Cluster) ReportResult(h *host.Host, r outlier.Result) {
	if c.outlier != nil {
		c.outlier.Report(h, r)
	}
}
