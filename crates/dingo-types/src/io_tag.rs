//! Who an IO is for: the one definition every crate uses (the wire form
//! and its conversions are `dingo-proto`'s).

use crate::{DeclarationId, TaskKind};

/// Who an IO is for: the foreground workload or a maintenance task serving a
/// planner declaration. Nodes count bytes and requests per class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum IoTag {
    #[default]
    Foreground,
    Maintenance {
        task: TaskKind,
        declaration: DeclarationId,
    },
}

impl IoTag {
    /// Counter label: `foreground` or the task name.
    pub fn class_name(self) -> &'static str {
        match self {
            IoTag::Foreground => "foreground",
            IoTag::Maintenance { task, .. } => task.name(),
        }
    }

    /// Dense counter index: 0 for foreground, `1 + task index` otherwise.
    pub fn class_index(self) -> usize {
        match self {
            IoTag::Foreground => 0,
            IoTag::Maintenance { task, .. } => 1 + task.index(),
        }
    }

    /// Number of distinct [`Self::class_index`] values.
    pub const CLASSES: usize = 1 + TaskKind::COUNT;

    /// Name of a class index, inverse of [`Self::class_index`].
    pub fn class_name_of(index: usize) -> &'static str {
        index.checked_sub(1).map_or("foreground", |i| TaskKind::ALL[i].name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_tag_classes_index_densely() {
        let tag = IoTag::Maintenance { task: TaskKind::Scrubbing, declaration: DeclarationId(7) };
        assert_eq!(IoTag::class_name_of(tag.class_index()), "scrubbing");
        assert_eq!(IoTag::class_name_of(IoTag::Foreground.class_index()), "foreground");
        let all: Vec<usize> = TaskKind::ALL
            .iter()
            .map(|&task| IoTag::Maintenance { task, declaration: DeclarationId(0) }.class_index())
            .collect();
        assert_eq!(all, (1..IoTag::CLASSES).collect::<Vec<_>>());
    }
}
