"""Cluster-level and configuration APIs: ApiVersions, Metadata, FindCoordinator, DescribeCluster,
DescribeConfigs."""
