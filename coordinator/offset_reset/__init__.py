"""Offset-reset plans, pure: kafka-consumer-groups' scenarios, range clamping, datetimes and durations, the CSV plan."""
