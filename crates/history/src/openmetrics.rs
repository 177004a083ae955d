//! om
