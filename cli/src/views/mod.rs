//! What the commands print for a person: the terminal's tables and the timeline's SVG. The
//! library (`xcsp-stack`) answers data; the controller writes the same data as conditions and
//! events, never these texts.

pub mod cost;
pub mod health;
pub mod timeline;
