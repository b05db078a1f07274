//! The names vertices had in the input file.

/// Why a product of two files is refused when either names its vertices by labels or SNAP
/// ids (the command line and the Python package say it alike).
pub const TWO_NUMBERINGS: &str = "A·B of two files needs numeric ids (el, wel, mtx): label and \
                                  SNAP ids are renumbered per file, so their rows and columns \
                                  would not match";

/// The names vertices had in the input, indexed by gmcl's dense vertex id.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Labels {
    /// Vertex `i` was `i` in the input (`.el`, `.wel`: ids from 0).
    #[default]
    Identity,
    /// Vertex `i` was `i + 1` in the input (`.mtx`: indices from 1).
    OneBased,
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
            Labels::OneBased => {
                out.extend_from_slice(itoa::Buffer::new().format(i as u64 + 1).as_bytes())
            }
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

    /// How a numbering that is not positional becomes rows and columns 0, 1, ... (which is what
    /// an output in a positional format holds instead of the file's names); `None` for
    /// positional numberings.
    pub fn renumbering(&self) -> Option<&'static str> {
        match self {
            Labels::Ids(_) => Some("its vertex ids become 0, 1, ... in increasing order"),
            Labels::Names(_) => Some("its labels become 0, 1, ... in order of first appearance"),
            Labels::Identity | Labels::OneBased => None,
        }
    }

    /// Whether vertex ids are the file's own numbers, shifted by at most a fixed base (`.el`,
    /// `.wel`, `.mtx`), so that row `i` of one file is row `i` of another.
    pub fn is_positional(&self) -> bool {
        matches!(self, Labels::Identity | Labels::OneBased)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_file_numbering() {
        assert_eq!(Labels::Identity.label(0), "0");
        assert_eq!(Labels::OneBased.label(0), "1");
        assert_eq!(Labels::OneBased.label(u32::MAX), "4294967296");
        assert_eq!(Labels::Ids(vec![7, 9]).label(1), "9");
        assert_eq!(Labels::Names(vec!["a b".into()]).label(0), "a b");
        assert!(Labels::OneBased.is_positional() && !Labels::Ids(vec![]).is_positional());
    }
}
