package options

import (
	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	"google.golang.org/protobuf/types/known/durationpb"
)

// CommandLineOptions returns the envoy.admin.v3.CommandLineOptions message that /server_info
// shows under "command_line_options", filled the way Envoy fills it: the effective values
// (concurrency at least 1, log level "warning" for "warn", socket_mode 0 for an abstract
// socket), stats tags as "name:value", and fields Envoy never sets left at zero
// (enable_core_dump, file_flush_min_size). Each call returns a new message.
func (o *Options) CommandLineOptions() *adminv3.CommandLineOptions {
	clo := &adminv3.CommandLineOptions{
		BaseId:                     uint64(o.BaseID),
		UseDynamicBaseId:           o.UseDynamicBaseID,
		SkipHotRestartOnNoParent:   o.SkipHotRestartOnNoParent,
		SkipHotRestartParentStats:  o.SkipHotRestartParentStats,
		BaseIdPath:                 o.BaseIDPath,
		Concurrency:                o.Concurrency,
		ConfigPath:                 o.ConfigPath,
		ConfigYaml:                 o.ConfigYAML,
		AllowUnknownStaticFields:   o.AllowUnknownStaticFields,
		RejectUnknownDynamicFields: o.RejectUnknownDynamicFields,
		IgnoreUnknownDynamicFields: o.IgnoreUnknownDynamicFields,
		SkipDeprecatedLogs:         o.SkipDeprecatedLogs,
		AdminAddressPath:           o.AdminAddressPath,
		LocalAddressIpVersion:      adminv3.CommandLineOptions_v4,
		LogLevel:                   o.LogLevel,
		ComponentLogLevel:          o.ComponentLogLevel,
		LogFormat:                  o.LogFormat,
		LogFormatEscaped:           o.LogFormatEscaped,
		LogPath:                    o.LogPath,
		ServiceCluster:             o.ServiceCluster,
		ServiceNode:                o.ServiceNode,
		ServiceZone:                o.ServiceZone,
		FileFlushInterval:          durationpb.New(o.FileFlushInterval),
		DrainTime:                  durationpb.New(o.DrainTime),
		DrainStrategy:              adminv3.CommandLineOptions_Gradual,
		ParentShutdownTime:         durationpb.New(o.ParentShutdownTime),
		Mode:                       adminv3.CommandLineOptions_Serve,
		DisableHotRestart:          o.DisableHotRestart,
		EnableMutexTracing:         o.EnableMutexTracing,
		RestartEpoch:               o.RestartEpoch,
		CpusetThreads:              o.CpusetThreads,
		EnableFineGrainLogging:     o.EnableFineGrainLogging,
		LogStacktraceSingleEntry:   o.LogStacktraceSingleEntry,
		SocketPath:                 o.SocketPath,
		SocketMode:                 o.SocketMode,
	}
	if o.LocalAddressIPVersion == IPv6 {
		clo.LocalAddressIpVersion = adminv3.CommandLineOptions_v6
	}
	if o.DrainStrategy == DrainImmediate {
		clo.DrainStrategy = adminv3.CommandLineOptions_Immediate
	}
	switch o.Mode {
	case ModeValidate:
		clo.Mode = adminv3.CommandLineOptions_Validate
	case ModeInitOnly:
		clo.Mode = adminv3.CommandLineOptions_InitOnly
	}
	if len(o.DisabledExtensions) > 0 {
		clo.DisabledExtensions = append([]string(nil), o.DisabledExtensions...)
	}
	for _, tag := range o.StatsTags {
		clo.StatsTag = append(clo.StatsTag, tag.Name+":"+tag.Value)
	}
	return clo
}
