package health

func upstreamMain() bool { return false }
