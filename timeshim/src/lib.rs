//! timeshim: simulated clocks and timers for scheduler processes.
