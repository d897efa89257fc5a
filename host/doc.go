// Package host holds the upstream endpoint model shared by the cluster manager, health checkers,
// the outlier detector, load balancers and the admin interface.
//
// A Host is created once per endpoint by discovery. Its identity fields (address, hostname,
// locality, metadata, canary) never change after New; its health flags, weight and active request
// count are atomics, so health checkers and the outlier detector update them without locks while
// the data plane reads them.
//
// A Set is one priority level and a PrioritySet is the ordered list of levels. Both are immutable
// snapshots: the cluster manager builds a new one after every membership or health change and
// publishes it; readers share them freely across goroutines without locking.
package host
