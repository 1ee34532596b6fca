//! The OLE compound file ([MS-CFB]) an `.xls` workbook lives in: reading
//! one stream out of it, and writing one stream into a new file.
//!
//! A compound file is a little file system: fixed-size sectors, a table
//! (the FAT) saying which sector follows which, a directory of named
//! streams. calamine reads it as written: a sector chain that loops makes
//! its buffer grow until memory runs out, and the failed allocation aborts
//! the whole process. So troupe reads the workbook stream here, every walk
//! bounded by the file itself (a chain visits no more sectors than the file
//! has, names none past its end, and the FAT kept is no larger than the
//! file needs), then hands calamine a new file it wrote: one stream in one
//! plain chain ([`write_stream`], used by `xls_guard`).
//!
//! The `cfb` crate was weighed for the reading: it checks its chains for
//! loops, but reads every FAT sector the DIFAT lists before comparing their
//! count with the file's, so a forged DIFAT (every entry naming one sector)
//! makes it hold about 127 bytes of FAT for each byte of file.
//!
//! [MS-CFB]: https://learn.microsoft.com/en-us/openspecs/windows_protocols/ms-cfb/

use super::Failure;

/// The first bytes of every compound file.
const SIGNATURE: [u8; 8] = [0xD0, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1];
/// The header's own length (in a version 4 file it fills a 4096-byte sector).
const HEADER_LEN: usize = 512;
/// The FAT's mark for the last sector of a chain.
const END_OF_CHAIN: u32 = 0xFFFF_FFFE;
/// The FAT's mark for a sector that holds the FAT.
const FAT_SECTOR: u32 = 0xFFFF_FFFD;
/// The FAT's mark for a sector that holds the DIFAT.
const DIFAT_SECTOR: u32 = 0xFFFF_FFFC;
/// An unused sector, or no sibling or child in the directory.
const FREE: u32 = 0xFFFF_FFFF;
/// The highest number that names a real sector.
const LAST_SECTOR: u32 = 0xFFFF_FFF9;
/// Streams shorter than this live in the mini stream, in 64-byte sectors.
const MINI_CUTOFF: u64 = 4096;
const MINI_SECTOR_LEN: usize = 64;
const ENTRY_LEN: usize = 128;
/// FAT sector numbers the header holds; more go in DIFAT sectors.
const HEADER_DIFAT: usize = 109;
/// The sector length of the files [`write_stream`] writes (version 3).
const SECTOR_LEN: usize = 512;

/// The bytes of the first stream named one of `names` (compared as calamine
/// compares them: ASCII case ignored), in the order given: `Workbook`, then
/// `Book` for the BIFF5 files of Excel 95.
pub(super) fn read_stream(file: &[u8], names: &[&str]) -> Result<Vec<u8>, Failure> {
    let compound = Compound::open(file)?;
    let entries = compound.directory()?;
    if entries.iter().any(|e| e.name == "EncryptedPackage") {
        // An encrypted XLSX: Office keeps it in a compound file.
        return Err(Failure::Encrypted);
    }
    let Some(entry) = names
        .iter()
        .find_map(|name| entries.iter().find(|e| e.name.eq_ignore_ascii_case(name)))
    else {
        return Err(Failure::Corrupt(format!(
            "its compound file holds no {} stream, so it is no Excel 97-2003 workbook \
             (another Office file named .xls?)",
            names.join(" or ")
        )));
    };
    if entry.size < MINI_CUTOFF {
        let root = entries.first().map_or(Entry::EMPTY, |e| e.clone());
        let mini = compound.chain(root.start, root.size, "mini stream")?;
        let mini_fat = compound.chain(compound.mini_fat_start, u64::MAX, "mini FAT")?;
        read_mini_chain(&mini, &u32s(&mini_fat), entry.start, entry.size)
    } else {
        compound.chain(entry.start, entry.size, "workbook stream")
    }
}

/// A compound file of one stream, `name`, holding `stream` (a version 3
/// file: 512-byte sectors). A stream under 4096 bytes is padded with zeros
/// to 4096, so it lives in plain sectors rather than in the mini stream;
/// calamine never reads past a workbook's last EOF record.
pub(super) fn write_stream(name: &str, stream: &[u8]) -> Result<Vec<u8>, Failure> {
    let size = stream.len().max(MINI_CUTOFF as usize);
    let size32 = u32::try_from(size).map_err(|_| {
        Failure::Corrupt(format!(
            "its workbook, laid out again, takes {size} bytes, more than a compound file holds"
        ))
    })?;
    let per_sector = SECTOR_LEN / 4;
    let data_sectors = size.div_ceil(SECTOR_LEN);
    // FAT and DIFAT sectors enough for every sector, themselves included.
    let (mut fat_sectors, mut difat_sectors) = (0, 0);
    loop {
        let total = fat_sectors + difat_sectors + 1 + data_sectors;
        let fat = total.div_ceil(per_sector);
        let difat = fat.saturating_sub(HEADER_DIFAT).div_ceil(per_sector - 1);
        if (fat, difat) == (fat_sectors, difat_sectors) {
            break;
        }
        (fat_sectors, difat_sectors) = (fat, difat);
    }
    let dir_sector = fat_sectors + difat_sectors;
    let first_data = dir_sector + 1;
    let total = first_data + data_sectors;
    let id = |n: usize| n as u32; // every count here is under 2^32 / 512

    let mut fat = Vec::with_capacity(fat_sectors * per_sector);
    fat.extend((0..fat_sectors).map(|_| FAT_SECTOR));
    fat.extend((0..difat_sectors).map(|_| DIFAT_SECTOR));
    fat.push(END_OF_CHAIN);
    fat.extend((first_data + 1..total).map(id));
    fat.push(END_OF_CHAIN);
    fat.resize(fat_sectors * per_sector, FREE);

    let fat_ids: Vec<u32> = (0..fat_sectors).map(id).collect();
    let mut out = Vec::with_capacity(SECTOR_LEN * (1 + total));
    // The header.
    out.extend_from_slice(&SIGNATURE);
    out.extend_from_slice(&[0; 16]); // class id
    for field in [0x003E_u16, 3, 0xFFFE, 9, 6] {
        out.extend_from_slice(&field.to_le_bytes()); // versions, byte order, sector shifts
    }
    out.extend_from_slice(&[0; 6]);
    let first_difat = if difat_sectors == 0 {
        END_OF_CHAIN
    } else {
        id(fat_sectors)
    };
    for field in [
        0, // directory sectors (0 in version 3)
        id(fat_sectors),
        id(dir_sector),
        0, // transaction signature
        MINI_CUTOFF as u32,
        END_OF_CHAIN, // no mini FAT
        0,
        first_difat,
        id(difat_sectors),
    ] {
        out.extend_from_slice(&field.to_le_bytes());
    }
    for n in 0..HEADER_DIFAT {
        let sector = fat_ids.get(n).copied().unwrap_or(FREE);
        out.extend_from_slice(&sector.to_le_bytes());
    }
    // The FAT, then the DIFAT sectors: the FAT sectors past the header's,
    // each sector's last entry naming the next DIFAT sector.
    for entry in &fat {
        out.extend_from_slice(&entry.to_le_bytes());
    }
    let rest = fat_ids.get(HEADER_DIFAT..).unwrap_or_default();
    for d in 0..difat_sectors {
        let from = d * (per_sector - 1);
        for n in 0..per_sector - 1 {
            let sector = rest.get(from + n).copied().unwrap_or(FREE);
            out.extend_from_slice(&sector.to_le_bytes());
        }
        let next = if d + 1 == difat_sectors {
            END_OF_CHAIN
        } else {
            id(fat_sectors + d + 1)
        };
        out.extend_from_slice(&next.to_le_bytes());
    }
    // The directory: the root, the stream, two unused entries.
    out.extend(dir_entry("Root Entry", 5, 1, END_OF_CHAIN, 0));
    out.extend(dir_entry(name, 2, FREE, id(first_data), size32));
    for _ in 0..SECTOR_LEN / ENTRY_LEN - 2 {
        out.extend(dir_entry("", 0, FREE, 0, 0));
    }
    out.extend_from_slice(stream);
    out.resize(SECTOR_LEN * (1 + total), 0);
    Ok(out)
}

/// One 128-byte directory entry of `kind` (5 root, 2 stream, 0 unused).
fn dir_entry(name: &str, kind: u8, child: u32, start: u32, size: u32) -> Vec<u8> {
    let mut entry = Vec::with_capacity(ENTRY_LEN);
    let units: Vec<u16> = name.encode_utf16().take(31).collect();
    for unit in &units {
        entry.extend_from_slice(&unit.to_le_bytes());
    }
    entry.resize(64, 0);
    let name_len = if units.is_empty() {
        0
    } else {
        (units.len() as u16 + 1) * 2
    };
    entry.extend_from_slice(&name_len.to_le_bytes());
    entry.push(kind);
    entry.push(u8::from(kind != 0)); // black, in the red-black tree
    for link in [FREE, FREE, child] {
        entry.extend_from_slice(&link.to_le_bytes()); // left, right, child
    }
    entry.resize(116, 0); // class id, state, times
    entry.extend_from_slice(&start.to_le_bytes());
    entry.extend_from_slice(&size.to_le_bytes());
    entry.resize(ENTRY_LEN, 0);
    entry
}

/// A compound file opened for reading: its sectors and its FAT.
struct Compound<'a> {
    file: &'a [u8],
    sector_len: usize,
    /// Sectors in the file after the header's (the last may be cut short).
    sectors: u32,
    /// Version 4 directory entries hold 64-bit sizes.
    wide_sizes: bool,
    fat: Vec<u32>,
    dir_start: u32,
    mini_fat_start: u32,
}

/// A directory entry: a stream's (or the root's) name, first sector, size.
#[derive(Debug, Clone)]
struct Entry {
    name: String,
    start: u32,
    size: u64,
}

impl Entry {
    const EMPTY: Entry = Entry {
        name: String::new(),
        start: END_OF_CHAIN,
        size: 0,
    };
}

impl<'a> Compound<'a> {
    /// Reads the header and the FAT.
    fn open(file: &'a [u8]) -> Result<Self, Failure> {
        if !file.starts_with(&SIGNATURE) {
            return Err(Failure::Corrupt(if file.starts_with(b"PK\x03\x04") {
                "it is a zip, not the OLE compound file of an Excel 97-2003 workbook: an .xlsx \
                 named .xls? rename it .xlsx"
                    .to_string()
            } else {
                "it does not start as the OLE compound file of an Excel 97-2003 workbook does \
                 (a text or HTML table named .xls?)"
                    .to_string()
            }));
        }
        if file.len() < HEADER_LEN {
            return Err(damaged(format!(
                "its {}-byte header is cut short",
                file.len()
            )));
        }
        let sector_len = match u16_at(file, 30) {
            9 => 512,
            12 => 4096,
            shift => {
                return Err(damaged(format!(
                    "its sector shift is {shift}, where 9 or 12 is allowed"
                )))
            }
        };
        if u16_at(file, 32) != 6 {
            return Err(damaged("its mini sectors are not 64 bytes"));
        }
        let sectors = (file.len().saturating_sub(sector_len)).div_ceil(sector_len);
        let mut compound = Compound {
            file,
            sector_len,
            sectors: u32::try_from(sectors).unwrap_or(u32::MAX),
            wide_sizes: sector_len == 4096,
            fat: Vec::new(),
            dir_start: u32_at(file, 48),
            mini_fat_start: u32_at(file, 60),
        };
        compound.fat = compound.read_fat()?;
        Ok(compound)
    }

    /// The FAT: the sectors the DIFAT names (the header's 109, then the
    /// DIFAT chain's), joined; only as much as the file has sectors for.
    fn read_fat(&self) -> Result<Vec<u32>, Failure> {
        let needed = self.sectors as usize;
        let per_sector = self.sector_len / 4;
        let mut fat: Vec<u32> = Vec::with_capacity(needed.min(self.file.len() / 4));
        let add = |fat: &mut Vec<u32>, sector: u32| -> Result<(), Failure> {
            if sector <= LAST_SECTOR && fat.len() < needed {
                fat.extend(u32s(self.sector(sector, "FAT")?));
            }
            Ok(())
        };
        for n in 0..HEADER_DIFAT {
            add(&mut fat, u32_at(self.file, 76 + 4 * n))?;
        }
        let mut next = u32_at(self.file, 68);
        let mut hops = 0;
        while next <= LAST_SECTOR && fat.len() < needed {
            hops += 1;
            if hops > self.sectors {
                return Err(damaged("its DIFAT chain loops"));
            }
            let entries = u32s(self.sector(next, "DIFAT")?);
            next = END_OF_CHAIN;
            for (n, entry) in entries.iter().enumerate() {
                if n + 1 == per_sector {
                    next = *entry;
                } else {
                    add(&mut fat, *entry)?;
                }
            }
        }
        Ok(fat)
    }

    /// Sector `id`'s bytes (the last sector may be short).
    fn sector(&self, id: u32, what: &str) -> Result<&'a [u8], Failure> {
        if id >= self.sectors {
            return Err(damaged(format!(
                "its {what} names sector {id}, past the end of the file ({} sectors)",
                self.sectors
            )));
        }
        let start = (id as usize + 1) * self.sector_len;
        let end = (start + self.sector_len).min(self.file.len());
        Ok(&self.file[start..end])
    }

    /// Up to `size` bytes of the chain from sector `start`: shorter if the
    /// chain ends first, refused if it loops or leaves the file.
    fn chain(&self, start: u32, size: u64, what: &str) -> Result<Vec<u8>, Failure> {
        let want = usize::try_from(size).unwrap_or(usize::MAX);
        let mut out = Vec::with_capacity(want.min(self.file.len()).min(1 << 20));
        let mut id = start;
        let mut hops = 0;
        while id != END_OF_CHAIN && out.len() < want {
            hops += 1;
            if hops > self.sectors {
                return Err(damaged(format!("its {what}'s sector chain loops")));
            }
            if id > LAST_SECTOR {
                return Err(damaged(format!(
                    "its {what}'s sector chain runs into a free or reserved sector"
                )));
            }
            let sector = self.sector(id, what)?;
            out.extend_from_slice(&sector[..sector.len().min(want - out.len())]);
            id = match self.fat.get(id as usize) {
                Some(next) => *next,
                None => {
                    return Err(damaged(format!(
                        "its FAT does not say which sector follows sector {id} of its {what}"
                    )))
                }
            };
        }
        Ok(out)
    }

    /// Every entry of the directory, in the order written.
    fn directory(&self) -> Result<Vec<Entry>, Failure> {
        let bytes = self.chain(self.dir_start, u64::MAX, "directory")?;
        Ok(bytes
            .chunks_exact(ENTRY_LEN)
            .map(|raw| {
                let units: Vec<u16> = raw[..64]
                    .chunks_exact(2)
                    .map(|u| u16::from_le_bytes([u[0], u[1]]))
                    .take_while(|u| *u != 0)
                    .collect();
                let size = if self.wide_sizes {
                    u64::from(u32_at(raw, 120)) | u64::from(u32_at(raw, 124)) << 32
                } else {
                    u64::from(u32_at(raw, 120))
                };
                Entry {
                    name: String::from_utf16_lossy(&units),
                    start: u32_at(raw, 116),
                    size,
                }
            })
            .collect())
    }
}

/// Up to `size` bytes of the chain from mini sector `start` of `mini`.
fn read_mini_chain(
    mini: &[u8],
    mini_fat: &[u32],
    start: u32,
    size: u64,
) -> Result<Vec<u8>, Failure> {
    let want = usize::try_from(size).unwrap_or(usize::MAX);
    let mut out = Vec::with_capacity(want.min(mini.len()));
    let mut id = start;
    let mut hops = 0;
    while id != END_OF_CHAIN && out.len() < want {
        hops += 1;
        let at = (id as usize).saturating_mul(MINI_SECTOR_LEN);
        if hops > mini.len() / MINI_SECTOR_LEN + 1 {
            return Err(damaged("its workbook stream's mini sector chain loops"));
        }
        let Some(sector) = mini.get(at..(at + MINI_SECTOR_LEN).min(mini.len())) else {
            return Err(damaged(format!(
                "its workbook stream names mini sector {id}, past the end of the mini stream \
                 ({} bytes)",
                mini.len()
            )));
        };
        out.extend_from_slice(&sector[..sector.len().min(want - out.len())]);
        id = match mini_fat.get(id as usize) {
            Some(next) => *next,
            None => {
                return Err(damaged(format!(
                    "its mini FAT does not say which mini sector follows {id}"
                )))
            }
        };
    }
    Ok(out)
}

fn damaged(what: impl std::fmt::Display) -> Failure {
    Failure::Corrupt(format!(
        "the OLE compound file around it is damaged: {what}"
    ))
}

fn u16_at(bytes: &[u8], at: usize) -> u16 {
    match bytes.get(at..at + 2) {
        Some(b) => u16::from_le_bytes([b[0], b[1]]),
        None => 0,
    }
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    match bytes.get(at..at + 4) {
        Some(b) => u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
        None => FREE,
    }
}

/// Little-endian 32-bit numbers (a trailing part under four bytes dropped).
fn u32s(bytes: &[u8]) -> Vec<u32> {
    bytes
        .chunks_exact(4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

#[cfg(test)]
#[path = "compound_file_tests.rs"]
mod tests;
