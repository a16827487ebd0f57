pub use taps_core;
