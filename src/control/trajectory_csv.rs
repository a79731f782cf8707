//! The trajectory CSV format: header `t,x,y,z,xd,yd,zd,xdd,ydd,zdd`, one waypoint per row,
//! SI units (s, m, m/s, m/s^2).

use std::io::{Read, Write};

use serde::{Deserialize, Serialize};

use super::trajectory::Waypoint;
use crate::model::math::Vec3;

/// The header every trajectory CSV file starts with.
pub const HEADER: [&str; 10] = ["t", "x", "y", "z", "xd", "yd", "zd", "xdd", "ydd", "zdd"];

#[derive(Debug, thiserror::Error)]
pub enum CsvError {
    #[error("the header must be `{}`, found `{found}`", HEADER.join(","))]
    BadHeader { found: String },
    #[error("line {line}: {message}")]
    BadRow { line: u64, message: String },
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

#[derive(Debug, Serialize, Deserialize)]
struct Row {
    t: f64,
    x: f64,
    y: f64,
    z: f64,
    xd: f64,
    yd: f64,
    zd: f64,
    xdd: f64,
    ydd: f64,
    zdd: f64,
}

impl From<Row> for Waypoint {
    fn from(row: Row) -> Waypoint {
        Waypoint {
            t: row.t,
            x: Vec3::new(row.x, row.y, row.z),
            xd: Vec3::new(row.xd, row.yd, row.zd),
            xdd: Vec3::new(row.xdd, row.ydd, row.zdd),
        }
    }
}

impl From<&Waypoint> for Row {
    fn from(w: &Waypoint) -> Row {
        Row {
            t: w.t,
            x: w.x.x,
            y: w.x.y,
            z: w.x.z,
            xd: w.xd.x,
            yd: w.xd.y,
            zd: w.xd.z,
            xdd: w.xdd.x,
            ydd: w.xdd.y,
            zdd: w.xdd.z,
        }
    }
}

/// Reads every waypoint of a trajectory CSV. Validation of the values (finite, increasing t,
/// reachable) is [`super::Trajectory::new`]'s job; this checks only the format.
pub fn read_waypoints(reader: impl Read) -> Result<Vec<Waypoint>, CsvError> {
    let mut csv = csv::ReaderBuilder::new().trim(csv::Trim::All).from_reader(reader);
    let headers = csv.headers().map_err(row_error)?;
    if !headers.iter().eq(HEADER) {
        return Err(CsvError::BadHeader { found: headers.iter().collect::<Vec<_>>().join(",") });
    }
    csv.deserialize::<Row>().map(|row| row.map(Waypoint::from).map_err(row_error)).collect()
}

/// Writes waypoints as trajectory CSV, header first.
pub fn write_waypoints<'a>(
    writer: impl Write,
    waypoints: impl IntoIterator<Item = &'a Waypoint>,
) -> Result<(), CsvError> {
    // The header is written even with no rows, so an empty trajectory reads back as one.
    let mut csv = csv::WriterBuilder::new().has_headers(false).from_writer(writer);
    csv.write_record(HEADER).map_err(row_error)?;
    for waypoint in waypoints {
        csv.serialize(Row::from(waypoint)).map_err(row_error)?;
    }
    csv.flush()?;
    Ok(())
}

fn row_error(error: csv::Error) -> CsvError {
    let line = error.position().map_or(0, |position| position.line());
    let message = error.to_string();
    match error.into_kind() {
        csv::ErrorKind::Io(error) => CsvError::Io(error),
        _ => CsvError::BadRow { line, message },
    }
}
