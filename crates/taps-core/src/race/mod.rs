//! The Happy Eyeballs race state machine (sans-IO).
