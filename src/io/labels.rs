//! The names vertices had in the input file.

/// The names vertices had in the input, indexed by gmcl's dense vertex id.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Labels {
    /// Vertex `i` was `i` in the input (`.el`, `.wel`, `.mtx` shifted to 0-based).
    #[default]
    Identity,
    /// Vertex `i` was the integer `ids[i]` in the input (SNAP text, compacted ids).
    Ids(Vec<u32>),
    /// Vertex `i` was the label `names[i]` (mcl's `abc` format).
    Names(Vec<String>),
}

impl Labels {
    /// Appends the input name of vertex `i`.
    pub fn write_label(&self, i: u32, out: &mut Vec<u8>) {
        match self {
            Labels::Identity => out.extend_from_slice(itoa::Buffer::new().format(i).as_bytes()),
            Labels::Ids(ids) => {
                out.extend_from_slice(itoa::Buffer::new().format(ids[i as usize]).as_bytes())
            }
            Labels::Names(n) => out.extend_from_slice(n[i as usize].as_bytes()),
        }
    }

    /// The input name of vertex `i` as a string.
    pub fn label(&self, i: u32) -> String {
        let mut v = Vec::new();
        self.write_label(i, &mut v);
        String::from_utf8_lossy(&v).into_owned()
    }
}
